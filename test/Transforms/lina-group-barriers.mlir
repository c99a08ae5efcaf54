// RUN: lina-opt %s -split-input-file -lina-group-barriers | FileCheck %s
// RUN: lina-opt %s -split-input-file -lina-group-barriers -lina-group-barriers | FileCheck %s
// RUN: lina-opt %s -split-input-file -lina-group-barriers=window=0 | FileCheck %s --check-prefix=NONE
// RUN: lina-opt %s -split-input-file -lina-group-barriers | lina-translate --split-input-file --emit-cuda-backward | FileCheck %s --check-prefix=EMIT
// RUN: lina-opt %s -split-input-file -lina-group-barriers=window=0 | lina-translate --split-input-file --emit-cuda-backward | FileCheck %s --check-prefix=CHAIN
// RUN: not lina-translate %s --split-input-file --emit-cuda-backward 2>&1 | FileCheck %s --check-prefix=REFUSED
// RUN: not lina-opt %s -lina-group-barriers=window=-1 2>&1 | FileCheck %s --check-prefix=WINDOW

// The gradients kernel of two independent chains, q dS scaled into dq and
// k dS scaled into dk. Sunk to their readers, each op reads its
// predecessor's tile: a barrier before every op. Grouped, the two chains
// share their intervals: the two products, then the two scales, then the
// two accumulates. Planned twice, the same; window 0 records nothing.
// CHECK-LABEL: lina.chunked_backward @la_backward
// CHECK: lina.load q {lina.interval = 0 : i64}
// CHECK: lina.load k {lina.interval = 0 : i64}
// CHECK: lina.matmul {{.*}} {lina.interval = 1 : i64}
// CHECK: lina.scale {{.*}} {lina.interval = 2 : i64}
// CHECK: lina.accumulate q, {{.*}} {lina.interval = 3 : i64}
// CHECK: lina.matmul {{.*}} {lina.interval = 1 : i64}
// CHECK: lina.scale {{.*}} {lina.interval = 2 : i64}
// CHECK: lina.accumulate k, {{.*}} {lina.interval = 3 : i64}
// NONE-NOT: lina.interval
// EMIT-LABEL: lina_chunk_backward(
// EMIT: __syncthreads();
// EMIT-NEXT: matmul<16, 16, 16, false, true>
// EMIT-NEXT: matmul<16, 16, 16, false, true>
// EMIT-NEXT: __syncthreads();
// EMIT-NEXT: scale<384>
// EMIT-NEXT: scale<384>
// EMIT-NEXT: __syncthreads();
// EMIT-NEXT: accumulate_rows<16, 16>(d.dq
// EMIT-NEXT: accumulate_rows<16, 16>(d.dk
// CHAIN-LABEL: lina_chunk_backward(
// CHAIN: matmul<16, 16, 16, false, true>
// CHAIN-NEXT: __syncthreads();
// CHAIN-NEXT: scale<384>
// CHAIN-NEXT: __syncthreads();
// CHAIN-NEXT: accumulate_rows<16, 16>(d.dq
// WINDOW: lina-group-barriers: window must not be negative (0: record none)
module {
  lina.chunked @la <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16> chunk_size(16) schedule <tile_v = 16, warps = 4, strategy = materialize> {
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
  lina.chunked_backward @la_backward <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16> chunk_size(16) schedule <tile_v = 16, warps = 4> {
  ^bb0(%s: !lina.tile<16x16>, %ds: !lina.tile<16x16>):
    %0 = lina.load q : <16x16>
    %1 = lina.load k : <16x16>
    %2 = lina.matmul %0, %ds : <16x16>, <16x16> -> <16x16>
    %3 = lina.scale %2 by 2.0 : <16x16>
    lina.accumulate q, %3 : <16x16>
    %4 = lina.matmul %1, %ds : <16x16>, <16x16> -> <16x16>
    %5 = lina.scale %4 by 3.0 : <16x16>
    lina.accumulate k, %5 : <16x16>
    lina.yield %ds : <16x16>
  }
}

// -----

// Intervals that would read a value before it is made are refused, naming
// the pass.
// REFUSED: error: 'lina.scale' records lina.interval 1, before its operand's maker 'lina.matmul' (2) (run -lina-group-barriers to plan them)
module {
  lina.chunked @la <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16> chunk_size(16) schedule <tile_v = 16, warps = 4, strategy = materialize> {
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
  lina.chunked_backward @la_backward <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16> chunk_size(16) schedule <tile_v = 16, warps = 4> {
  ^bb0(%s: !lina.tile<16x16>, %ds: !lina.tile<16x16>):
    %0 = lina.load q {lina.interval = 0 : i64} : <16x16>
    %1 = lina.load k {lina.interval = 0 : i64} : <16x16>
    %2 = lina.matmul %0, %ds {lina.interval = 2 : i64} : <16x16>, <16x16> -> <16x16>
    %3 = lina.scale %2 by 2.0 {lina.interval = 1 : i64} : <16x16>
    lina.accumulate q, %3 {lina.interval = 3 : i64} : <16x16>
    %4 = lina.matmul %1, %ds {lina.interval = 1 : i64} : <16x16>, <16x16> -> <16x16>
    %5 = lina.scale %4 by 3.0 {lina.interval = 2 : i64} : <16x16>
    lina.accumulate k, %5 {lina.interval = 3 : i64} : <16x16>
    lina.yield %ds : <16x16>
  }
}
