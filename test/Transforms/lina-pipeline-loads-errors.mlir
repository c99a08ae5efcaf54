// RUN: lina-opt %s -split-input-file -verify-diagnostics
// RUN: lina compile rwkv7 --emit mlir --chunk-size 64 \
// RUN:   | sed 's/placement <state = registers>/placement <state = registers, ring = 3>/' \
// RUN:   | not lina-translate --emit-cuda 2>&1 | FileCheck %s --check-prefix=EMIT

// lina-pipeline-loads' record, the placement's ring, is checked where it is
// read back: by the attribute's verifier, and by the emitter, which refuses a ring whose
// buffers do not fit (rwkv7's 64-token chunks, where the pass records none).
// EMIT: placement <ring = 3>, but the fetched tiles' buffers need {{[0-9]+}} bytes of shared memory, more than the 232448 a CTA can have (run -lina-pipeline-loads to pipeline the loads)

// expected-error @+1 {{placement: ring must be 0 (no fetch ahead), 1, 2 or 3, got 4}}
lina.chunked @gla <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> chunk_size(16) placement <ring = 4> {
^bb0(%s: !lina.tile<16x16>):
  lina.yield %s : <16x16>
}

// -----

// The retired integer record is refused by name.
lina.chunked @gla <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> chunk_size(16) {
^bb0(%s: !lina.tile<16x16>):
  %k = lina.load k : <16x16>
  // expected-error @+1 {{unknown lina attribute 'lina.ring'}}
  %n = lina.l2norm %k {lina.ring = 2 : i64} : <16x16>
  lina.yield %s : <16x16>
}

// -----

// expected-error @+1 {{placement: min_ctas must be 0 (no minimum) to 32, got 33}}
lina.chunked @gla <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> chunk_size(16) placement <min_ctas = 33> {
^bb0(%s: !lina.tile<16x16>):
  lina.yield %s : <16x16>
}

// -----

// expected-error @+1 {{placement: parallel_min_ctas must be 0 (no minimum) to 32, got -1}}
lina.chunked @gla <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> chunk_size(16) placement <parallel_min_ctas = -1> {
^bb0(%s: !lina.tile<16x16>):
  lina.yield %s : <16x16>
}
