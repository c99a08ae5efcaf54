// RUN: lina-opt %s -split-input-file -lina-chunk=chunk-size=64 -lina-schedule="tile-v=128 warps=8 prefetch=1 mma=warpgroup" -lina-solve-residual -lina-warpgroup-roles -lina-warpgroup-groups | FileCheck %s
// RUN: lina-opt %s -split-input-file -lina-chunk=chunk-size=64 -lina-schedule="tile-v=128 warps=8 prefetch=1 mma=warpgroup" -lina-solve-residual -lina-warpgroup-roles -lina-warpgroup-groups -lina-warpgroup-groups | FileCheck %s
// RUN: lina-opt %s -split-input-file -lina-chunk=chunk-size=64 -lina-schedule="tile-v=128 warps=8 prefetch=1" -lina-solve-residual -lina-warpgroup-roles -lina-warpgroup-groups | FileCheck %s --check-prefix=MMA
// RUN: lina compile mamba2 --dtype f16 --mma warpgroup --emit cuda | FileCheck %s --check-prefix=ADDITIVE
// RUN: lina compile gdn --dtype f16 --mma warpgroup --emit cuda | FileCheck %s --check-prefix=DELTA

// The additive rule: of the two products of the landed tiles the scores
// come first (the intra-chunk product reads P; nothing later reads X S's
// result), then the intra-chunk product and the update. Recorded twice,
// the same.
// CHECK-LABEL: lina.chunked @retnet_write_gate
// CHECK: lina.decay_product {{.*}} {lina.warpgroup = "scores", lina.wg_group = 0 : i64}
// CHECK: lina.matmul {{.*}} {lina.warpgroup = "update", lina.wg_group = 3 : i64, transpose_lhs}
// CHECK: lina.matmul {{.*}} {lina.warpgroup = "state_product", lina.wg_group = 1 : i64}
// CHECK: lina.matmul {{.*}} {lina.warpgroup = "intra", lina.wg_group = 2 : i64}

// The delta rule: the residual's product first, whose result the solve,
// the intra-chunk product and the update all read; then the scores, the
// state's product, the solve, the intra-chunk product and the update.
// CHECK-LABEL: lina.chunked @delta_gated_write
// CHECK: lina.matmul {{.*}} {lina.warpgroup = "residual_product", lina.wg_group = 0 : i64}
// CHECK: lina.tri_solve {{.*}} {lina.warpgroup = "solve", lina.wg_group = 3 : i64}
// CHECK: lina.decay_product {{.*}} {lina.warpgroup = "scores", lina.wg_group = 1 : i64}
// CHECK: lina.matmul {{.*}} {lina.warpgroup = "update", lina.wg_group = 5 : i64, transpose_lhs}
// CHECK: lina.matmul {{.*}} {lina.warpgroup = "state_product", lina.wg_group = 2 : i64}
// CHECK: lina.matmul {{.*}} {lina.warpgroup = "intra", lina.wg_group = 4 : i64}

// Without warpgroup products there is nothing to order.
// MMA-NOT: lina.wg_group

// The printer issues the landed tiles' products in their groups' order
// and counts each wait from it: the scores with one group left in flight,
// X S with none; the output once the update alone is in flight.
// ADDITIVE-LABEL: lina_chunk_fused(
// ADDITIVE: wg_issue_scores<K, W>(pacc, qt, kt, wg);
// ADDITIVE-NEXT: wg_issue_state_product<K>(oacc, a, qt);
// ADDITIVE: wg_wait<1>();
// ADDITIVE-NEXT: wg_store_scores<W>(
// ADDITIVE: wg_wait<0>();
// ADDITIVE-NEXT: wg_scale_columns(oacc,
// ADDITIVE: wg_wait<1>();
// ADDITIVE-NEXT: wg_store_output<

// The delta rule's residual once its product alone has landed (two groups
// in flight), P and X S with the solve in flight, the values once it has
// landed.
// DELTA-LABEL: lina_chunk_split_scan(
// DELTA: wg_issue_state_product<K>(yacc, a, kt);
// DELTA-NEXT: wg_issue_scores<K, W>(pacc, qt, kt, wg);
// DELTA-NEXT: wg_issue_state_product<K>(oacc, a, qt);
// DELTA: wg_wait<2>();
// DELTA: wg_residual(
// DELTA: wg_issue_solve(
// DELTA: wg_wait<1>();
// DELTA-NEXT: wg_store_scores<W>(
// DELTA: wg_wait<0>();
// DELTA: wg_issue_values_intra(

lina.recurrence @retnet_write_gate <decay = fixed, update = additive, beta = sigmoid, write = beta, key_dim = 128, value_dim = 128, heads = 4, value_heads = 4, dtype = bf16, initial_state = true, final_state = true>

// -----

lina.recurrence @delta_gated_write <decay = fixed, update = delta, beta = sigmoid, qk_l2norm = true, key_dim = 128, value_dim = 128, heads = 4, value_heads = 4, dtype = bf16, initial_state = true, final_state = true>
