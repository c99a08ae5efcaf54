// RUN: lina-opt %s -split-input-file -lina-chunk=chunk-size=64 -lina-schedule="tile-v=64 warps=8 prefetch=1 mma=warpgroup" -lina-solve-residual -lina-warpgroup-roles -lina-warpgroup-groups | FileCheck %s
// RUN: lina-opt %s -split-input-file -lina-chunk=chunk-size=64 -lina-schedule="tile-v=64 warps=4 prefetch=1 mma=warpgroup" -lina-solve-residual -lina-warpgroup-roles -lina-warpgroup-groups | FileCheck %s --check-prefix=TOGETHER
// RUN: lina compile %lina_src/examples/catalog/gdn_f16.mlir --mma warpgroup --tile-v 64 --warps 8 --emit cuda | FileCheck %s --check-prefix=KERNEL
// RUN: lina compile rwkv7 --mma warpgroup --tile-v 64 --warps 8 --emit cuda | FileCheck %s --check-prefix=IDLE
// RUN: not lina compile mamba2 --dtype f16 --mma warpgroup --tile-v 64 --warps 8 --emit cuda 2>&1 | FileCheck %s --check-prefix=ADDITIVE

// A delta rule's 64-column value tile on eight warps: the scores go to
// the second warpgroup (`scores_apart`), whose product is in no commit
// group of the first: the residual's product, the state's, the solve,
// the intra-chunk product and the update are its groups 0 to 4.
// CHECK-LABEL: lina.chunked @delta_gated_write
// CHECK: lina.matmul {{.*}} {lina.warpgroup = "residual_product", lina.wg_group = 0 : i64}
// CHECK: lina.tri_solve {{.*}} {lina.warpgroup = "solve", lina.wg_group = 2 : i64}
// CHECK: lina.decay_product {{.*}} {lina.warpgroup = "scores_apart"}
// CHECK: lina.matmul {{.*}} {lina.warpgroup = "update", lina.wg_group = 4 : i64, transpose_lhs}
// CHECK: lina.matmul {{.*}} {lina.warpgroup = "state_product", lina.wg_group = 1 : i64}
// CHECK: lina.matmul {{.*}} {lina.warpgroup = "intra", lina.wg_group = 3 : i64}

// On four warps the one warpgroup forms the scores too.
// TOGETHER-LABEL: lina.chunked @delta_gated_write
// TOGETHER: lina.decay_product {{.*}} {lina.warpgroup = "scores", lina.wg_group = 1 : i64}

// The printed scan: the last warpgroup issues q k^T, forms q's norms and
// P, and signals each; the first starts its products once it has said
// the stage landed, waits for the norms before its row factors and for P
// before the intra-chunk product.
// KERNEL-LABEL: lina_chunk_split_scan(
// KERNEL: if (wg == W) {
// KERNEL: cta_sync_at<kChunkLanded>();
// KERNEL: wg_issue_scores<K, 1>(pacc, qt, kt, 0);
// KERNEL: wg_row_norms<K, 128>(norms + 0 * 64, qt);
// KERNEL-NEXT: cta_sync_at<kScoresGroup, 128>();
// KERNEL-NEXT: cta_arrive_at<kScalesReady>();
// KERNEL: wg_store_scores<1>(ptile, pacc, 0, n,
// KERNEL: cta_arrive_at<kPReady>();
// KERNEL: return;
// KERNEL: wg_zero_rows_past<K, 128>(kt, n);
// KERNEL: cta_arrive_at<kChunkLanded>();
// KERNEL-NOT: wg_issue_scores
// KERNEL: wg_issue_state_product<K>(yacc, a, kt);
// KERNEL-NEXT: wg_issue_state_product<K>(oacc, a, qt);
// KERNEL: cta_sync_at<kScalesReady>();
// KERNEL: wg_issue_solve(
// KERNEL: wg_wait<1>();
// KERNEL-NEXT: wg_scale_columns(oacc,
// KERNEL: cta_sync_at<kPReady>();
// KERNEL-NEXT: wg_issue_values_intra(

// A per-channel decay's or DPLR's tile on eight warps: the prepare kernel
// takes both warpgroups, the scan lets the second go and meets at its
// own barrier.
// IDLE: __launch_bounds__(256, 1) lina_chunk_prepare(
// IDLE-LABEL: lina_chunk_split_scan(
// IDLE: wg_init_barriers(landed);
// IDLE-NEXT: // The prepare kernel's second warpgroup: nothing to do here.
// IDLE-NEXT: if (wg == W)
// IDLE-NEXT: return;
// IDLE-NOT: __syncthreads
// IDLE: cta_sync_at<6, 128 * W>();

// The additive rule with at most a scalar decay prepares nothing: its
// scan keeps its scores with the state, on four warps a tile.
// ADDITIVE: 8 warps on a 64-column tile only for the rules with a prepare kernel (the delta rule, DPLR, a per-channel decay)

lina.recurrence @delta_gated_write <decay = fixed, update = delta, beta = sigmoid, qk_l2norm = true, key_dim = 128, value_dim = 128, heads = 4, value_heads = 4, dtype = bf16, initial_state = true, final_state = true>
