// RUN: lina-opt %s -split-input-file -verify-diagnostics
// RUN: lina compile gdn --emit mlir | sed 's/lina.load v {lina.row_pass = 2 : i64}/lina.load v {lina.row_pass = 1 : i64}/' \
// RUN:   | not lina-translate --emit-cuda 2>&1 | FileCheck %s --check-prefix=MOVED
// RUN: lina compile gdn --emit mlir | sed 's/lina.load q {lina.row_pass = 0 : i64}/lina.load q/' \
// RUN:   | not lina-translate --emit-cuda 2>&1 | FileCheck %s --check-prefix=UNRECORDED

// lina-row-passes' record is checked where it is read back: by the
// dialect's verifier, and by the emitter, which prints each row pass as
// recorded or not at all.
// MOVED: 'lina.load' records row pass 1, but the prepare kernel runs it in row pass 2 (run -lina-row-passes to plan them)
// UNRECORDED: 'lina.load' records no row pass, but the prepare kernel runs it in row pass 0 (run -lina-row-passes to plan them)

lina.chunked @gla <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> chunk_size(16) schedule <tile_v = 16, warps = 4, strategy = split> {
^bb0(%s: !lina.tile<16x16>):
  // expected-error @+1 {{'lina.row_pass' must be a row pass's index, an i64 of 0 or more, got -1 : i64}}
  %k = lina.load k {lina.row_pass = -1 : i64} : <16x16>
  lina.yield %s : <16x16>
}

// -----

lina.chunked @gla <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> chunk_size(16) schedule <tile_v = 16, warps = 4, strategy = split> {
^bb0(%s: !lina.tile<16x16>):
  // expected-error @+1 {{'lina.row_pass' must be a row pass's index, an i64 of 0 or more, got "first"}}
  %k = lina.load k {lina.row_pass = "first"} : <16x16>
  lina.yield %s : <16x16>
}

// -----

// Only the split strategy's prepare kernel runs row passes.
lina.chunked @gla <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> chunk_size(16) schedule <tile_v = 16, warps = 4> {
^bb0(%s: !lina.tile<16x16>):
  // expected-error @+1 {{'lina.row_pass' belongs on an op of a lina.chunked whose schedule splits it (strategy = split)}}
  %k = lina.load k {lina.row_pass = 0 : i64} : <16x16>
  lina.yield %s : <16x16>
}
