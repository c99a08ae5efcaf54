// RUN: lina-opt %s -lina-solve-residual | FileCheck %s

// Solves of two different matrices are not one solve: left as written.
// CHECK-LABEL: lina.chunked @two_matrices
// CHECK-COUNT-2: lina.tri_solve
lina.chunked @two_matrices <decay = none, update = delta, beta = given, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> chunk_size(16) schedule <tile_v = 16, warps = 4, mma = warpgroup> {
^bb0(%s: !lina.tile<16x16>):
  %k = lina.load k : <16x16>
  %v = lina.load v : <16x16>
  %z = lina.zeros : <16x1>
  %a = lina.decay_product %k, %k, %z, %z strict : <16x16>, <16x16>, <16x1>, <16x1> -> <16x16>
  %b = lina.decay_product %v, %v, %z, %z strict : <16x16>, <16x16>, <16x1>, <16x1> -> <16x16>
  %x = lina.tri_solve %a, %v : <16x16>, <16x16>
  %y = lina.tri_solve %b, %k : <16x16>, <16x16>
  %ys = lina.matmul %y, %s : <16x16>, <16x16> -> <16x16>
  %u = lina.sub %x, %ys : <16x16>
  lina.store o, %u : <16x16>
  lina.yield %s : <16x16>
}
