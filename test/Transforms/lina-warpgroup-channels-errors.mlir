// RUN: lina-opt %s -split-input-file -verify-diagnostics -lina-warpgroup-roles

// A per-channel decay's chunk that the printed kernels cannot run is an
// error naming the op, not a kernel that leaves it out.

// -----

// The prepare kernel stores the decay of the one running sum it computes.
// expected-error @+1 {{warpgroup scan: 'lina.decay_state' must read the per-channel gates' running sum itself}}
lina.chunked @gla <decay = per_channel, update = additive, key_dim = 64, value_dim = 64, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> chunk_size(64) schedule <tile_v = 64, warps = 4, prefetch = true, wgmma = true> {
^bb0(%s: !lina.tile<64x64>):
  %q = lina.load q : <64x64>
  %k = lina.load k : <64x64>
  %v = lina.load v : <64x64>
  %qs = lina.scale %q by 1.250000e-01 : <64x64>
  %g = lina.load g : <64x64>
  %G = lina.cumsum %g : <64x64>
  %G2 = lina.scale %G by 2.000000e+00 : <64x64>
  %p = lina.decay_product %qs, %k, %G, %G inclusive : <64x64>, <64x64>, <64x64>, <64x64> -> <64x64>
  %d = lina.decay_state %s, %G2 : <64x64>, <64x64>
  %kt = lina.decay_rows %k, %G {to_end} : <64x64>, <64x64>
  %u = lina.matmul %kt, %v {transpose_lhs} : <64x64>, <64x64> -> <64x64>
  %next = lina.add %d, %u : <64x64>
  %x = lina.decay_rows %qs, %G : <64x64>, <64x64>
  %xs = lina.matmul %x, %s : <64x64>, <64x64> -> <64x64>
  %i = lina.matmul %p, %v : <64x64>, <64x64> -> <64x64>
  %o = lina.add %xs, %i : <64x64>
  lina.store o, %o : <64x64>
  lina.yield %next : <64x64>
}

// -----

// The scores' own decay is the decay_product's; a per-channel decay of an
// operand as well does not factor around the blocks' midpoints.
// expected-error @+1 {{warpgroup scan: 'lina.decay_rows' decays a row of the scores' operands per channel (the scores' decay_product decays them)}}
lina.chunked @gla <decay = per_channel, update = additive, key_dim = 64, value_dim = 64, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> chunk_size(64) schedule <tile_v = 64, warps = 4, prefetch = true, wgmma = true> {
^bb0(%s: !lina.tile<64x64>):
  %q = lina.load q : <64x64>
  %k = lina.load k : <64x64>
  %v = lina.load v : <64x64>
  %qs = lina.scale %q by 1.250000e-01 : <64x64>
  %g = lina.load g : <64x64>
  %G = lina.cumsum %g : <64x64>
  %qd = lina.decay_rows %qs, %G : <64x64>, <64x64>
  %p = lina.decay_product %qd, %k, %G, %G inclusive : <64x64>, <64x64>, <64x64>, <64x64> -> <64x64>
  %d = lina.decay_state %s, %G : <64x64>, <64x64>
  %kt = lina.decay_rows %k, %G {to_end} : <64x64>, <64x64>
  %u = lina.matmul %kt, %v {transpose_lhs} : <64x64>, <64x64> -> <64x64>
  %next = lina.add %d, %u : <64x64>
  %x = lina.decay_rows %qs, %G : <64x64>, <64x64>
  %xs = lina.matmul %x, %s : <64x64>, <64x64> -> <64x64>
  %i = lina.matmul %p, %v : <64x64>, <64x64> -> <64x64>
  %o = lina.add %xs, %i : <64x64>
  lina.store o, %o : <64x64>
  lina.yield %next : <64x64>
}

// -----

// v arrives by TMA and is read as it lands: a per-channel factor on its
// rows has nowhere to go.
// expected-error @+1 {{warpgroup scan: 'lina.decay_rows' decays v's rows (the printed scans decay q's and k's)}}
lina.chunked @gla <decay = per_channel, update = additive, key_dim = 64, value_dim = 64, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> chunk_size(64) schedule <tile_v = 64, warps = 4, prefetch = true, wgmma = true> {
^bb0(%s: !lina.tile<64x64>):
  %q = lina.load q : <64x64>
  %k = lina.load k : <64x64>
  %v = lina.load v : <64x64>
  %qs = lina.scale %q by 1.250000e-01 : <64x64>
  %g = lina.load g : <64x64>
  %G = lina.cumsum %g : <64x64>
  %vd = lina.decay_rows %v, %G : <64x64>, <64x64>
  %p = lina.decay_product %qs, %k, %G, %G inclusive : <64x64>, <64x64>, <64x64>, <64x64> -> <64x64>
  %d = lina.decay_state %s, %G : <64x64>, <64x64>
  %kt = lina.decay_rows %k, %G {to_end} : <64x64>, <64x64>
  %u = lina.matmul %kt, %vd {transpose_lhs} : <64x64>, <64x64> -> <64x64>
  %next = lina.add %d, %u : <64x64>
  %x = lina.decay_rows %qs, %G : <64x64>, <64x64>
  %xs = lina.matmul %x, %s : <64x64>, <64x64> -> <64x64>
  %i = lina.matmul %p, %v : <64x64>, <64x64> -> <64x64>
  %o = lina.add %xs, %i : <64x64>
  lina.store o, %o : <64x64>
  lina.yield %next : <64x64>
}

// -----

// One running sum a chunk.
// expected-error @+1 {{warpgroup scan: 'lina.cumsum' sums the per-channel gates a second time}}
lina.chunked @gla <decay = per_channel, update = additive, key_dim = 64, value_dim = 64, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> chunk_size(64) schedule <tile_v = 64, warps = 4, prefetch = true, wgmma = true> {
^bb0(%s: !lina.tile<64x64>):
  %q = lina.load q : <64x64>
  %k = lina.load k : <64x64>
  %v = lina.load v : <64x64>
  %qs = lina.scale %q by 1.250000e-01 : <64x64>
  %g = lina.load g : <64x64>
  %G = lina.cumsum %g : <64x64>
  %G2 = lina.cumsum %g : <64x64>
  %p = lina.decay_product %qs, %k, %G, %G inclusive : <64x64>, <64x64>, <64x64>, <64x64> -> <64x64>
  %d = lina.decay_state %s, %G2 : <64x64>, <64x64>
  %kt = lina.decay_rows %k, %G {to_end} : <64x64>, <64x64>
  %u = lina.matmul %kt, %v {transpose_lhs} : <64x64>, <64x64> -> <64x64>
  %next = lina.add %d, %u : <64x64>
  %x = lina.decay_rows %qs, %G : <64x64>, <64x64>
  %xs = lina.matmul %x, %s : <64x64>, <64x64> -> <64x64>
  %i = lina.matmul %p, %v : <64x64>, <64x64> -> <64x64>
  %o = lina.add %xs, %i : <64x64>
  lina.store o, %o : <64x64>
  lina.yield %next : <64x64>
}
