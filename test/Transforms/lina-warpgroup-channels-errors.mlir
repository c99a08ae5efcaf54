// RUN: lina-opt %s -split-input-file -verify-diagnostics -lina-warpgroup-roles

// A per-channel decay's chunk that the printed kernels cannot run is an
// error naming the op, not a kernel that leaves it out.

// -----

// The prepare kernel stores the decay of the one running sum it computes.
// expected-error @+1 {{warpgroup scan: 'lina.decay_state' must read the per-channel gates' running sum itself}}
lina.chunked @gla <decay = per_channel, update = additive, key_dim = 64, value_dim = 64, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> chunk_size(64) schedule <tile_v = 64, warps = 4, prefetch = true, mma = warpgroup> {
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
lina.chunked @gla <decay = per_channel, update = additive, key_dim = 64, value_dim = 64, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> chunk_size(64) schedule <tile_v = 64, warps = 4, prefetch = true, mma = warpgroup> {
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
lina.chunked @gla <decay = per_channel, update = additive, key_dim = 64, value_dim = 64, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> chunk_size(64) schedule <tile_v = 64, warps = 4, prefetch = true, mma = warpgroup> {
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
lina.chunked @gla <decay = per_channel, update = additive, key_dim = 64, value_dim = 64, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> chunk_size(64) schedule <tile_v = 64, warps = 4, prefetch = true, mma = warpgroup> {
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

// -----

// DPLR's values are one solve a chunk, of the residual Y S + L V: the sum
// of two solves is lina-solve-residual's to rewrite first.
// expected-error @+1 {{warpgroup scan: 'lina.add' must add B~^T U, U one solve a chunk (run -lina-solve-residual), and K~^T V}}
lina.chunked @rwkv7 <decay = per_channel, update = dplr, key_dim = 64, value_dim = 64, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> chunk_size(64) schedule <tile_v = 64, warps = 4, prefetch = true, mma = warpgroup> {
^bb0(%s: !lina.tile<64x64>):
  %q = lina.load q : <64x64>
  %k = lina.load k : <64x64>
  %v = lina.load v : <64x64>
  %qs = lina.scale %q by 1.250000e-01 : <64x64>
  %g = lina.load g : <64x64>
  %G = lina.cumsum %g : <64x64>
  %a = lina.load a : <64x64>
  %b = lina.load b : <64x64>
  %Gx = lina.cumsum %g {exclusive} : <64x64>
  %ab = lina.decay_product %a, %b, %Gx, %G strict : <64x64>, <64x64>, <64x64>, <64x64> -> <64x64>
  %m = lina.neg %ab : <64x64>
  %y = lina.decay_rows %a, %Gx : <64x64>, <64x64>
  %l = lina.decay_product %a, %k, %Gx, %G strict : <64x64>, <64x64>, <64x64>, <64x64> -> <64x64>
  %lv = lina.matmul %l, %v : <64x64>, <64x64> -> <64x64>
  %ty = lina.tri_solve %m, %y : <64x64>, <64x64>
  %tys = lina.matmul %ty, %s : <64x64>, <64x64> -> <64x64>
  %tlv = lina.tri_solve %m, %lv : <64x64>, <64x64>
  %u = lina.add %tys, %tlv : <64x64>
  %pb = lina.decay_product %qs, %b, %G, %G inclusive : <64x64>, <64x64>, <64x64>, <64x64> -> <64x64>
  %pk = lina.decay_product %qs, %k, %G, %G inclusive : <64x64>, <64x64>, <64x64>, <64x64> -> <64x64>
  %d = lina.decay_state %s, %G : <64x64>, <64x64>
  %bt = lina.decay_rows %b, %G {to_end} : <64x64>, <64x64>
  %ub = lina.matmul %bt, %u {transpose_lhs} : <64x64>, <64x64> -> <64x64>
  %n1 = lina.add %d, %ub : <64x64>
  %kt = lina.decay_rows %k, %G {to_end} : <64x64>, <64x64>
  %uk = lina.matmul %kt, %v {transpose_lhs} : <64x64>, <64x64> -> <64x64>
  %next = lina.add %n1, %uk : <64x64>
  %x = lina.decay_rows %qs, %G : <64x64>, <64x64>
  %xs = lina.matmul %x, %s : <64x64>, <64x64> -> <64x64>
  %ob = lina.matmul %pb, %u : <64x64>, <64x64> -> <64x64>
  %o1 = lina.add %xs, %ob : <64x64>
  %ok = lina.matmul %pk, %v : <64x64>, <64x64> -> <64x64>
  %o = lina.add %o1, %ok : <64x64>
  lina.store o, %o : <64x64>
  lina.yield %next : <64x64>
}

// -----

// The state decays by G itself; G's exclusive twin decays only a row to
// the row before (a's rows and the left rows of its strict scores).
// expected-error @+1 {{warpgroup scan: 'lina.decay_state' must read the per-channel gates' running sum itself (or, decaying a row to the row before, its exclusive twin)}}
lina.chunked @rwkv7 <decay = per_channel, update = dplr, key_dim = 64, value_dim = 64, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> chunk_size(64) schedule <tile_v = 64, warps = 4, prefetch = true, mma = warpgroup> {
^bb0(%s: !lina.tile<64x64>):
  %q = lina.load q : <64x64>
  %k = lina.load k : <64x64>
  %v = lina.load v : <64x64>
  %qs = lina.scale %q by 1.250000e-01 : <64x64>
  %g = lina.load g : <64x64>
  %G = lina.cumsum %g : <64x64>
  %a = lina.load a : <64x64>
  %b = lina.load b : <64x64>
  %Gx = lina.cumsum %g {exclusive} : <64x64>
  %ab = lina.decay_product %a, %b, %Gx, %G strict : <64x64>, <64x64>, <64x64>, <64x64> -> <64x64>
  %m = lina.neg %ab : <64x64>
  %y = lina.decay_rows %a, %Gx : <64x64>, <64x64>
  %l = lina.decay_product %a, %k, %Gx, %G strict : <64x64>, <64x64>, <64x64>, <64x64> -> <64x64>
  %lv = lina.matmul %l, %v : <64x64>, <64x64> -> <64x64>
  %ys = lina.matmul %y, %s : <64x64>, <64x64> -> <64x64>
  %r = lina.add %ys, %lv : <64x64>
  %u = lina.tri_solve %m, %r : <64x64>, <64x64>
  %pb = lina.decay_product %qs, %b, %G, %G inclusive : <64x64>, <64x64>, <64x64>, <64x64> -> <64x64>
  %pk = lina.decay_product %qs, %k, %G, %G inclusive : <64x64>, <64x64>, <64x64>, <64x64> -> <64x64>
  %d = lina.decay_state %s, %Gx : <64x64>, <64x64>
  %bt = lina.decay_rows %b, %G {to_end} : <64x64>, <64x64>
  %ub = lina.matmul %bt, %u {transpose_lhs} : <64x64>, <64x64> -> <64x64>
  %n1 = lina.add %d, %ub : <64x64>
  %kt = lina.decay_rows %k, %G {to_end} : <64x64>, <64x64>
  %uk = lina.matmul %kt, %v {transpose_lhs} : <64x64>, <64x64> -> <64x64>
  %next = lina.add %n1, %uk : <64x64>
  %x = lina.decay_rows %qs, %G : <64x64>, <64x64>
  %xs = lina.matmul %x, %s : <64x64>, <64x64> -> <64x64>
  %ob = lina.matmul %pb, %u : <64x64>, <64x64> -> <64x64>
  %o1 = lina.add %xs, %ob : <64x64>
  %ok = lina.matmul %pk, %v : <64x64>, <64x64> -> <64x64>
  %o = lina.add %o1, %ok : <64x64>
  lina.store o, %o : <64x64>
  lina.yield %next : <64x64>
}

// -----

// The residual reads the state before the row's own write: its scores
// are strictly masked.
// expected-error @+1 {{warpgroup scan: 'lina.decay_product' must mask the residual's scores strictly}}
lina.chunked @rwkv7 <decay = per_channel, update = dplr, key_dim = 64, value_dim = 64, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> chunk_size(64) schedule <tile_v = 64, warps = 4, prefetch = true, mma = warpgroup> {
^bb0(%s: !lina.tile<64x64>):
  %q = lina.load q : <64x64>
  %k = lina.load k : <64x64>
  %v = lina.load v : <64x64>
  %qs = lina.scale %q by 1.250000e-01 : <64x64>
  %g = lina.load g : <64x64>
  %G = lina.cumsum %g : <64x64>
  %a = lina.load a : <64x64>
  %b = lina.load b : <64x64>
  %Gx = lina.cumsum %g {exclusive} : <64x64>
  %ab = lina.decay_product %a, %b, %Gx, %G strict : <64x64>, <64x64>, <64x64>, <64x64> -> <64x64>
  %m = lina.neg %ab : <64x64>
  %y = lina.decay_rows %a, %Gx : <64x64>, <64x64>
  %l = lina.decay_product %a, %k, %Gx, %G inclusive : <64x64>, <64x64>, <64x64>, <64x64> -> <64x64>
  %lv = lina.matmul %l, %v : <64x64>, <64x64> -> <64x64>
  %ys = lina.matmul %y, %s : <64x64>, <64x64> -> <64x64>
  %r = lina.add %ys, %lv : <64x64>
  %u = lina.tri_solve %m, %r : <64x64>, <64x64>
  %pb = lina.decay_product %qs, %b, %G, %G inclusive : <64x64>, <64x64>, <64x64>, <64x64> -> <64x64>
  %pk = lina.decay_product %qs, %k, %G, %G inclusive : <64x64>, <64x64>, <64x64>, <64x64> -> <64x64>
  %d = lina.decay_state %s, %G : <64x64>, <64x64>
  %bt = lina.decay_rows %b, %G {to_end} : <64x64>, <64x64>
  %ub = lina.matmul %bt, %u {transpose_lhs} : <64x64>, <64x64> -> <64x64>
  %n1 = lina.add %d, %ub : <64x64>
  %kt = lina.decay_rows %k, %G {to_end} : <64x64>, <64x64>
  %uk = lina.matmul %kt, %v {transpose_lhs} : <64x64>, <64x64> -> <64x64>
  %next = lina.add %n1, %uk : <64x64>
  %x = lina.decay_rows %qs, %G : <64x64>, <64x64>
  %xs = lina.matmul %x, %s : <64x64>, <64x64> -> <64x64>
  %ob = lina.matmul %pb, %u : <64x64>, <64x64> -> <64x64>
  %o1 = lina.add %xs, %ob : <64x64>
  %ok = lina.matmul %pk, %v : <64x64>, <64x64> -> <64x64>
  %o = lina.add %o1, %ok : <64x64>
  lina.store o, %o : <64x64>
  lina.yield %next : <64x64>
}
