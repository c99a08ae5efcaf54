// RUN: not lina-translate --emit-cuda-backward %s 2>&1 | FileCheck %s

// The backward runs its reverse scan beside the forward's scan that writes
// the states, so the state's gradient must not read the state. A linear
// recurrence's never does; a program where it does (here the yield adds
// the state itself) is refused, not printed with a race.
// CHECK: error: 'lina.add' makes the state's gradient depend on the state

module {
  lina.chunked @la <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> chunk_size(16) schedule <tile_v = 16, warps = 4, strategy = materialize> {
  ^bb0(%arg0: !lina.tile<16x16>):
    %0 = lina.load q : <16x16>
    %1 = lina.load k : <16x16>
    %2 = lina.load v : <16x16>
    %3 = lina.scale %0 by 2.500000e-01 : <16x16>
    %4 = lina.zeros : <16x1>
    %5 = lina.decay_product %3, %1, %4, %4 inclusive : <16x16>, <16x16>, <16x1>, <16x1> -> <16x16>
    %6 = lina.matmul %1, %2 {transpose_lhs} : <16x16>, <16x16> -> <16x16>
    %7 = lina.add %arg0, %6 : <16x16>
    %8 = lina.matmul %3, %arg0 : <16x16>, <16x16> -> <16x16>
    %9 = lina.matmul %5, %2 : <16x16>, <16x16> -> <16x16>
    %10 = lina.add %8, %9 : <16x16>
    lina.store o, %10 : <16x16>
    lina.yield %7 : <16x16>
  }
  lina.chunked_backward @la_backward <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> chunk_size(16) schedule <tile_v = 16, warps = 4> {
  ^bb0(%arg0: !lina.tile<16x16>, %arg1: !lina.tile<16x16>):
    %0 = lina.load q : <16x16>
    %1 = lina.load k : <16x16>
    %2 = lina.load v : <16x16>
    %3 = lina.scale %0 by 2.500000e-01 : <16x16>
    %4 = lina.zeros : <16x1>
    %5 = lina.decay_product %3, %1, %4, %4 inclusive : <16x16>, <16x16>, <16x1>, <16x1> -> <16x16>
    %6 = lina.load_output_grad : <16x16>
    %7 = lina.transpose %2 : <16x16> -> <16x16>
    %8 = lina.matmul %6, %7 : <16x16>, <16x16> -> <16x16>
    %9 = lina.matmul %5, %6 {transpose_lhs} : <16x16>, <16x16> -> <16x16>
    %10 = lina.transpose %arg0 : <16x16> -> <16x16>
    %11 = lina.matmul %6, %10 : <16x16>, <16x16> -> <16x16>
    %12 = lina.matmul %3, %6 {transpose_lhs} : <16x16>, <16x16> -> <16x16>
    %13 = lina.add %12, %arg0 : <16x16>
    %14 = lina.transpose %arg1 : <16x16> -> <16x16>
    %15 = lina.matmul %2, %14 : <16x16>, <16x16> -> <16x16>
    %16 = lina.matmul %1, %arg1 : <16x16>, <16x16> -> <16x16>
    %17 = lina.add %9, %16 : <16x16>
    %18 = lina.decay_product_grad lhs %8, %1, %4, %4 inclusive : <16x16>, <16x16>, <16x1>, <16x1> -> <16x16>
    %19 = lina.decay_product_grad rhs %8, %3, %4, %4 inclusive : <16x16>, <16x16>, <16x1>, <16x1> -> <16x16>
    %20 = lina.add %11, %18 : <16x16>
    %21 = lina.add %15, %19 : <16x16>
    %22 = lina.scale %20 by 2.500000e-01 : <16x16>
    lina.accumulate v, %17 : <16x16>
    lina.accumulate k, %21 : <16x16>
    lina.accumulate q, %22 : <16x16>
    lina.yield %13 : <16x16>
  }
}

