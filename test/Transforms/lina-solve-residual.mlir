// RUN: lina-opt %s -split-input-file -lina-chunk=chunk-size=64 -lina-schedule="tile-v=128 warps=8 prefetch=1 mma=warpgroup" -lina-solve-residual | FileCheck %s
// RUN: lina-opt %s -split-input-file -lina-chunk=chunk-size=64 -lina-schedule="tile-v=128 warps=8 prefetch=1" -lina-solve-residual | FileCheck %s --check-prefix=SPLIT

// Gated DeltaNet scheduled for warpgroup products: its new values,
// T (diag(beta) v) - T (diag(beta exp(G)) k) S, become the solve of the
// residual diag(beta) v - (diag(beta exp(G)) k) S, one solve a chunk.
// CHECK-LABEL: lina.chunked @gdn
// CHECK: %[[A:.*]] = lina.scale_rows %{{.*}}, %{{.*}} : <64x64>, <64x1>
// CHECK: %[[Y:.*]] = lina.scale_rows %{{.*}}, %{{.*}} : <64x128>, <64x1>
// CHECK: %[[X:.*]] = lina.scale_rows %{{.*}}, %{{.*}} : <64x128>, <64x1>
// CHECK: %[[YS:.*]] = lina.matmul %[[Y]], %arg0 : <64x128>, <128x128> -> <64x128>
// CHECK: %[[R:.*]] = lina.sub %[[X]], %[[YS]] : <64x128>
// CHECK: %[[U:.*]] = lina.tri_solve %[[A]], %[[R]] : <64x64>, <64x128>
// CHECK-NOT: lina.tri_solve
// CHECK: lina.matmul %{{.*}}, %[[U]] {transpose_lhs}
// CHECK: lina.matmul %{{.*}}, %[[U]] : <64x64>, <64x128> -> <64x128>

// The split strategy solves in its prepare kernel, before the state is
// known: both solves stay.
// SPLIT-LABEL: lina.chunked @gdn
// SPLIT-COUNT-2: lina.tri_solve
// SPLIT-NOT: lina.tri_solve

lina.recurrence @gdn <decay = scalar, update = delta, beta = given, qk_l2norm = true, key_dim = 128, value_dim = 128, heads = 4, value_heads = 4, dtype = bf16, initial_state = true, final_state = true>


// -----

// RWKV-7 (DPLR) scheduled for warpgroup products: its values, the sum
// T (A~) S + T (L V), become one solve of A~ S + L V.
// CHECK-LABEL: lina.chunked @rwkv7
// CHECK: %[[N:.*]] = lina.neg %{{.*}} : <64x64>
// CHECK: %[[Y:.*]] = lina.decay_rows %{{.*}}, %{{.*}} : <64x128>, <64x128>
// CHECK: %[[L:.*]] = lina.decay_product %{{.*}} strict
// CHECK: %[[LV:.*]] = lina.matmul %[[L]], %{{.*}} : <64x64>, <64x128> -> <64x128>
// CHECK: %[[YS:.*]] = lina.matmul %[[Y]], %arg0 : <64x128>, <128x128> -> <64x128>
// CHECK: %[[R:.*]] = lina.add %[[YS]], %[[LV]] : <64x128>
// CHECK: %[[U:.*]] = lina.tri_solve %[[N]], %[[R]] : <64x64>, <64x128>
// CHECK-NOT: lina.tri_solve
// CHECK: lina.matmul %{{.*}}, %[[U]] {transpose_lhs}
// CHECK: lina.matmul %{{.*}}, %[[U]] : <64x64>, <64x128> -> <64x128>
// SPLIT-LABEL: lina.chunked @rwkv7
// SPLIT-COUNT-2: lina.tri_solve
// SPLIT-NOT: lina.tri_solve

lina.recurrence @rwkv7 <decay = per_channel, update = dplr, key_dim = 128, value_dim = 128, heads = 4, value_heads = 4, dtype = bf16, initial_state = true, final_state = true>
