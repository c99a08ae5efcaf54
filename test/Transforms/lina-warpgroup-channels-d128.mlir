// RUN: lina-opt %s -lina-chunk=chunk-size=64 -lina-schedule="tile-v=128 warps=8 prefetch=1 mma=warpgroup" -lina-solve-residual -lina-warpgroup-roles -lina-warpgroup-groups -lina-warpgroup-record | lina-translate --emit-cuda | FileCheck %s

// The per-channel delta rule's prepare kernel at d128 (lina-warpgroup-
// channels.mlir has the kernels at d64; KDA with beta computed).
// At d128 A takes q's tile, each block row in q's rows as the scores read
// them for the last time (the tile's halves, which the solve is told), the
// solve's partial products the gates': 17 KB less, so that the kernel fits
// two CTAs an SM, which its bounds ask ptxas for. In bf16 the scores are
// bf16 products, and P and A, both against k's rows, are summed together
// (two boxes: one right operand, one pass).
// CHECK-LABEL: __launch_bounds__(256, 2) lina_chunk_prepare(
// CHECK: float *a = (float *)sm.tiles[0];
// CHECK: wg_channel_right<K>(sm, sm.tiles[1]);
// CHECK-NEXT: wg_channel_scores<K, true>(sm, sm.tiles[1], n,
// CHECK-NEXT: wg_box(sm.tiles[0], false, {{.*}} wg_put_box(record + {{[0-9]+}}, t, u, x0, x1); }),
// CHECK-NEXT: wg_box(sm.tiles[1], true, {{.*}} *(f32x2 *)(a + wg_halves_at(t, u)) = f32x2{x0, x1}; }));
// CHECK-NOT: wg_channel_scores
// CHECK: wg_unit_lower_inverse<kWgHalvesLd>(a, sm.right, sm.gates, [] {});
// CHECK: static_assert(sizeof(lina::wg_channel_smem<128>) == 112144

lina.recurrence @kda_d128_sigmoid <decay = per_channel, update = delta, beta = sigmoid, qk_l2norm = true, key_dim = 128, value_dim = 128, heads = 2, value_heads = 2, dtype = bf16, initial_state = true, final_state = true>
