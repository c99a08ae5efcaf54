// RUN: lina-opt %s -split-input-file -verify-diagnostics -lina-warpgroup-roles
// RUN: lina compile linear_attn --dtype f16 --mma warpgroup --emit mlir | sed 's/lina.warpgroup = "intra"/lina.warpgroup = "scores"/' \
// RUN:   | not lina-translate --emit-cuda 2>&1 | FileCheck %s --check-prefix=MOVED
// RUN: lina compile linear_attn --dtype f16 --mma warpgroup --emit mlir | sed 's/lina.load k {lina.warpgroup = "fetch"}/lina.load k/' \
// RUN:   | not lina-translate --emit-cuda 2>&1 | FileCheck %s --check-prefix=UNRECORDED

// The record is checked where it is read back: by the dialect's verifier,
// and by the printer, which prints the scan from the records and refuses
// one that disagrees with the chunk's ops.
// MOVED: 'lina.matmul' is recorded as the warpgroup scan's 'scores' but its operands make it its 'intra' (run -lina-warpgroup-roles)
// UNRECORDED: 'lina.load' carries no 'lina.warpgroup' part (run -lina-warpgroup-roles first)

lina.chunked @la <decay = none, update = additive, key_dim = 128, value_dim = 128, heads = 1, value_heads = 1, dtype = f16, initial_state = true, final_state = true> chunk_size(64) schedule <tile_v = 128, warps = 8, prefetch = true, mma = warpgroup> {
^bb0(%s: !lina.tile<128x128>):
  // expected-error @+1 {{'lina.warpgroup' must be a part of the warpgroup scan ("fetch", "column", "row_factor", "scores", "state_product", "intra", "output", "store", "decay", "update", "next", "solve_matrix", "residual_product", "residual", "solve", "prepared", "channel", "residual_intra" or "scores_apart"), got "prepare"}}
  %k = lina.load k {lina.warpgroup = "prepare"} : <64x128>
  lina.yield %s : <128x128>
}

// -----

lina.chunked @la <decay = none, update = additive, key_dim = 128, value_dim = 128, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> chunk_size(64) schedule <tile_v = 128, warps = 8, prefetch = true> {
^bb0(%s: !lina.tile<128x128>):
  // expected-error @+1 {{'lina.warpgroup' belongs on an op of a lina.chunked whose schedule asks for warpgroup products (mma = warpgroup)}}
  %k = lina.load k {lina.warpgroup = "fetch"} : <64x128>
  lina.yield %s : <128x128>
}

// -----

// q normalised in the kernel is a row scaling by its own norm, which the
// scan computes from the fetched tile; a norm of a scaled q it does not
// fold, and the pass names the op rather than print a kernel that leaves
// it out.
// expected-error @+1 {{warpgroup scan: 'lina.l2norm' must normalise the fetched q itself}}
lina.chunked @la <decay = none, update = additive, key_dim = 128, value_dim = 128, heads = 1, value_heads = 1, dtype = f16, initial_state = true, final_state = true> chunk_size(64) schedule <tile_v = 128, warps = 8, prefetch = true, mma = warpgroup> {
^bb0(%s: !lina.tile<128x128>):
  %q = lina.load q : <64x128>
  %k = lina.load k : <64x128>
  %v = lina.load v : <64x128>
  %qs = lina.scale %q by 2.0 : <64x128>
  %qn = lina.l2norm %qs : <64x128>
  %z = lina.zeros : <64x1>
  %p = lina.decay_product %qn, %k, %z, %z inclusive : <64x128>, <64x128>, <64x1>, <64x1> -> <64x64>
  %u = lina.matmul %k, %v {transpose_lhs} : <64x128>, <64x128> -> <128x128>
  %next = lina.add %s, %u : <128x128>
  %x = lina.matmul %qn, %s : <64x128>, <128x128> -> <64x128>
  %i = lina.matmul %p, %v : <64x64>, <64x128> -> <64x128>
  %o = lina.add %x, %i : <64x128>
  lina.store o, %o : <64x128>
  lina.yield %next : <128x128>
}

// -----

// A second output is no part of the scan.
// expected-error @+1 {{warpgroup scan: 'lina.store' stores a second output}}
lina.chunked @la <decay = none, update = additive, key_dim = 128, value_dim = 128, heads = 1, value_heads = 1, dtype = f16, initial_state = true, final_state = true> chunk_size(64) schedule <tile_v = 128, warps = 8, prefetch = true, mma = warpgroup> {
^bb0(%s: !lina.tile<128x128>):
  %q = lina.load q : <64x128>
  %k = lina.load k : <64x128>
  %v = lina.load v : <64x128>
  %z = lina.zeros : <64x1>
  %p = lina.decay_product %q, %k, %z, %z inclusive : <64x128>, <64x128>, <64x1>, <64x1> -> <64x64>
  %u = lina.matmul %k, %v {transpose_lhs} : <64x128>, <64x128> -> <128x128>
  %next = lina.add %s, %u : <128x128>
  %x = lina.matmul %q, %s : <64x128>, <128x128> -> <64x128>
  %i = lina.matmul %p, %v : <64x64>, <64x128> -> <64x128>
  %o = lina.add %x, %i : <64x128>
  lina.store o, %o : <64x128>
  lina.store o, %x : <64x128>
  lina.yield %next : <128x128>
}

// -----

// The delta rule solves with A strictly below the diagonal (I + A is unit
// lower triangular); an inclusive one is named.
// expected-error @+1 {{warpgroup scan: 'lina.tri_solve' must solve with a strictly masked decay_product of k's rows}}
lina.chunked @gdn <decay = none, update = delta, beta = given, key_dim = 64, value_dim = 64, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> chunk_size(64) schedule <tile_v = 64, warps = 4, prefetch = true, mma = warpgroup> {
^bb0(%s: !lina.tile<64x64>):
  %q = lina.load q : <64x64>
  %k = lina.load k : <64x64>
  %v = lina.load v : <64x64>
  %beta = lina.load beta : <64x1>
  %z = lina.zeros : <64x1>
  %p0 = lina.decay_product %k, %k, %z, %z inclusive : <64x64>, <64x64>, <64x1>, <64x1> -> <64x64>
  %a = lina.scale_rows %p0, %beta : <64x64>, <64x1>
  %y = lina.scale_rows %k, %beta : <64x64>, <64x1>
  %x = lina.scale_rows %v, %beta : <64x64>, <64x1>
  %ys = lina.matmul %y, %s : <64x64>, <64x64> -> <64x64>
  %r = lina.sub %x, %ys : <64x64>
  %u = lina.tri_solve %a, %r : <64x64>, <64x64>
  %p = lina.decay_product %q, %k, %z, %z inclusive : <64x64>, <64x64>, <64x1>, <64x1> -> <64x64>
  %ut = lina.matmul %k, %u {transpose_lhs} : <64x64>, <64x64> -> <64x64>
  %next = lina.add %s, %ut : <64x64>
  %xs = lina.matmul %q, %s : <64x64>, <64x64> -> <64x64>
  %i = lina.matmul %p, %u : <64x64>, <64x64> -> <64x64>
  %o = lina.add %xs, %i : <64x64>
  lina.store o, %o : <64x64>
  lina.yield %next : <64x64>
}
