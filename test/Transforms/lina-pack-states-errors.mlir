// RUN: not lina-translate %s --split-input-file --emit-cuda-backward 2>&1 | FileCheck %s

// lina-pack-states' records of loaded tiles kept packed (lina.packed) that
// the gradients kernel cannot honour are refused, naming the passes to run.

// k is read elementwise too, so the kernel cannot keep it packed.
// CHECK: error: 'lina.load' records lina.packed, but the gradients kernel does not load its tile in 16 bits for tensor-core products alone (run -lina-pack-states to choose)
module {
  lina.chunked @stale <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16> chunk_size(16) schedule <tile_v = 16, warps = 4, strategy = materialize> {
  ^bb0(%s: !lina.tile<16x16>):
    %0 = lina.load q : <16x16>
    %1 = lina.load k : <16x16>
    %2 = lina.load v : <16x16>
    %3 = lina.matmul %0, %s : <16x16>, <16x16> -> <16x16>
    lina.store o, %3 : <16x16>
    %4 = lina.matmul %1, %2 {transpose_lhs} : <16x16>, <16x16> -> <16x16>
    %5 = lina.add %s, %4 : <16x16>
    lina.yield %5 : <16x16>
  }
  lina.chunked_backward @stale_backward <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16> chunk_size(16) schedule <tile_v = 16, warps = 4> {
  ^bb0(%s: !lina.tile<16x16>, %ds: !lina.tile<16x16>):
    %0 = lina.load k {lina.packed} : <16x16>
    %1 = lina.matmul %0, %ds : <16x16>, <16x16> -> <16x16>
    lina.accumulate v, %1 : <16x16>
    %2 = lina.scale %0 by 2.0 : <16x16>
    lina.accumulate k, %2 : <16x16>
    lina.yield %ds : <16x16>
  }
}

// -----

// A packed tile stays in shared memory (ldmatrix reads nothing else): a
// record that also puts it in global memory is refused.
// CHECK: error: 'lina.load' records lina.in_global for the kernel "chunks", which keeps its tile packed, and a packed tile stays in shared memory (run -lina-pack-states, then -lina-global-tiles)
module {
  lina.chunked @both <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16> chunk_size(16) schedule <tile_v = 16, warps = 4, strategy = materialize> {
  ^bb0(%s: !lina.tile<16x16>):
    %0 = lina.load q : <16x16>
    %1 = lina.load k : <16x16>
    %2 = lina.load v : <16x16>
    %3 = lina.matmul %0, %s : <16x16>, <16x16> -> <16x16>
    lina.store o, %3 : <16x16>
    %4 = lina.matmul %1, %2 {transpose_lhs} : <16x16>, <16x16> -> <16x16>
    %5 = lina.add %s, %4 : <16x16>
    lina.yield %5 : <16x16>
  }
  lina.chunked_backward @both_backward <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16> chunk_size(16) schedule <tile_v = 16, warps = 4> {
  ^bb0(%s: !lina.tile<16x16>, %ds: !lina.tile<16x16>):
    %0 = lina.load q {lina.in_global = ["chunks"], lina.packed} : <16x16>
    %1 = lina.matmul %0, %ds : <16x16>, <16x16> -> <16x16>
    lina.accumulate q, %1 : <16x16>
    lina.yield %ds : <16x16>
  }
}
