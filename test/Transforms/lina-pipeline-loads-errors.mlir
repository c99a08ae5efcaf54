// RUN: lina-opt %s -split-input-file -verify-diagnostics
// RUN: lina compile rwkv7 --emit mlir --chunk-size 64 \
// RUN:   | sed 's/attributes {lina.state/attributes {lina.ring = 3 : i64, lina.state/' \
// RUN:   | not lina-translate --emit-cuda 2>&1 | FileCheck %s --check-prefix=EMIT

// lina-pipeline-loads' record is checked where it is read back: by the
// dialect's verifier, and by the emitter, which refuses a ring whose
// buffers do not fit (rwkv7's 64-token chunks, where the pass records none).
// EMIT: lina.ring = 3, but the fetched tiles' buffers need {{[0-9]+}} bytes of shared memory, more than the 232448 a CTA can have (run -lina-pipeline-loads to pipeline the loads)

// expected-error @+1 {{'lina.ring' must be 1, 2 or 3 (an i64), got 4 : i64}}
lina.chunked @gla <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> chunk_size(16) attributes {lina.ring = 4 : i64} {
^bb0(%s: !lina.tile<16x16>):
  lina.yield %s : <16x16>
}

// -----

lina.chunked @gla <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> chunk_size(16) {
^bb0(%s: !lina.tile<16x16>):
  %k = lina.load k : <16x16>
  // expected-error @+1 {{'lina.ring' belongs on a lina.chunked}}
  %n = lina.l2norm %k {lina.ring = 2 : i64} : <16x16>
  lina.yield %s : <16x16>
}
