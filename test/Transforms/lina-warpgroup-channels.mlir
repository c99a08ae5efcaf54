// RUN: lina-opt %s -lina-chunk=chunk-size=64 -lina-schedule="tile-v=64 warps=4 prefetch=1 wgmma=1" -lina-warpgroup-roles -lina-warpgroup-groups -lina-warpgroup-record | FileCheck %s
// RUN: lina-opt %s -lina-chunk=chunk-size=64 -lina-schedule="tile-v=64 warps=4 prefetch=1 wgmma=1" -lina-warpgroup-roles -lina-warpgroup-groups -lina-warpgroup-record -lina-warpgroup-roles -lina-warpgroup-groups -lina-warpgroup-record | FileCheck %s
// RUN: lina-opt %s -lina-chunk=chunk-size=64 -lina-schedule="tile-v=64 warps=4 prefetch=1 wgmma=1" -lina-warpgroup-roles -lina-warpgroup-groups -lina-warpgroup-record | lina-translate --emit-cuda | FileCheck %s --check-prefix=EMIT

// GLA with a sigmoid write weight at d64 (no template covers it). A
// per-channel decay does not factor into a row's and a column's, so the
// prepare kernel applies every factor of q's and k's rows ("prepared") and
// sums the gates a key channel ("channel"); the scan fetches only v. Its
// record carries, in program order, P, the state's decay, K~ and X; the
// scores are no product of the scan, so its products' groups start at X S.
// Recorded twice, the same.
// CHECK-LABEL: lina.chunked @gla_write
// CHECK: lina.load q {lina.warpgroup = "prepared"}
// CHECK: lina.load k {lina.warpgroup = "prepared"}
// CHECK: lina.load v {lina.warpgroup = "fetch"}
// CHECK: lina.scale {{.*}} {lina.warpgroup = "prepared"}
// CHECK: lina.load g {lina.warpgroup = "channel"}
// CHECK: lina.cumsum {{.*}} {lina.warpgroup = "channel"}
// CHECK: lina.load beta {lina.warpgroup = "column"}
// CHECK: lina.beta sigmoid {{.*}} {lina.warpgroup = "column"}
// CHECK: lina.scale_rows {{.*}} {lina.warpgroup = "prepared"}
// CHECK: lina.decay_product {{.*}} {lina.warpgroup = "scores", lina.wg_record = 0 : i64}
// CHECK: lina.decay_state {{.*}} {lina.warpgroup = "decay", lina.wg_record = 1 : i64}
// CHECK: lina.decay_rows {{.*}} {lina.warpgroup = "prepared", lina.wg_record = 2 : i64, to_end}
// CHECK: lina.matmul {{.*}} {lina.warpgroup = "update", lina.wg_group = 2 : i64, transpose_lhs}
// CHECK: lina.decay_rows {{.*}} {lina.warpgroup = "prepared", lina.wg_record = 3 : i64}
// CHECK: lina.matmul {{.*}} {lina.warpgroup = "state_product", lina.wg_group = 0 : i64}
// CHECK: lina.matmul {{.*}} {lina.warpgroup = "intra", lina.wg_group = 1 : i64}

// The prepare kernel: the gates' running sum a channel, X with q's scale
// and exp(G), K~ with the write weight and exp(G_last - G), the decay, and
// P with q's scale and the write weight of its key rows, laid out from the
// slots (P 8 KB, the decay 1 KB, K~ and X 8 KB each at d64).
// EMIT-LABEL: lina_chunk_prepare(
// EMIT: wg_channel_gates<K>(sm, n, false, [&](int r, int c) { return p.g[((t0 + r) * 2 + hv) * (i64)K + c]; });
// EMIT: unsigned char *record = {{.*}} * (i64)(6400));
// EMIT: wg_channel_rows<K, 1, 0>(record + 17408, sm.tiles[0], sm, n, [&](int r) { return 1.250000000e-01f; });
// EMIT: wg_channel_rows<K, -1, 1>(record + 9216, sm.tiles[1], sm, n, [&](int r) { return tab1[r]; });
// EMIT: wg_channel_decay<K>((float *)(record + 8192), sm, n);
// EMIT: wg_channel_scores<K>(sm, sm.tiles[0], sm.tiles[1], n, false, [&](int t, int u) { return 1.250000000e-01f * tab1[u]; });
// EMIT: ((u32x4 *)(record + 0))[i] = ((const u32x4 *)sm.p)[i];
// EMIT: static_assert(sizeof(lina::wg_channel_smem<64>) == 63760
// The scan: v and the record land together; no scores product, no factor.
// EMIT-LABEL: lina_chunk_split_scan(
// EMIT: kRecordBytes = 25600;
// EMIT: tma_box(at + box * 8192, &maps.v
// EMIT-NEXT: bulk_copy(at + kValueTile, {{.*}} * (i64)(6400), kRecordBytes, &landed[stage]);
// EMIT-NOT: wg_issue_scores
// EMIT: wg_issue_state_product<K>(oacc, a, rec + 17408);
// EMIT: wg_decay_key_columns<K>(s, (const float *)(rec + 8192));
// EMIT: wg_wait<0>();
// EMIT-NEXT: wg_issue_intra(oacc, vt, rec + 0, wg);
// EMIT-NEXT: wg_issue_update<K>(s, vt, rec + 9216, wg);
// EMIT-NEXT: wg_wait<1>();

lina.recurrence @gla_write <decay = per_channel, update = additive, beta = sigmoid, write = beta, key_dim = 64, value_dim = 64, heads = 2, value_heads = 2, dtype = bf16, initial_state = true, final_state = true>
