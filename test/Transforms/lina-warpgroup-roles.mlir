// RUN: lina-opt %s -lina-chunk=chunk-size=64 -lina-schedule="tile-v=128 warps=8 prefetch=1 mma=warpgroup" -lina-warpgroup-roles | FileCheck %s
// RUN: lina-opt %s -lina-chunk=chunk-size=64 -lina-schedule="tile-v=128 warps=8 prefetch=1 mma=warpgroup" -lina-warpgroup-roles -lina-warpgroup-roles | FileCheck %s
// RUN: lina-opt %s -lina-chunk=chunk-size=64 -lina-schedule="tile-v=128 warps=8 prefetch=1" -lina-warpgroup-roles | FileCheck %s --check-prefix=MMA
// RUN: lina-opt %s -lina-chunk=chunk-size=64 -lina-schedule="tile-v=128 warps=8 prefetch=1 mma=warpgroup" -lina-warpgroup-roles -lina-schedule="tile-v=128 warps=8 prefetch=1" -lina-warpgroup-roles | FileCheck %s --check-prefix=MMA
// RUN: lina-opt %s -lina-chunk=chunk-size=64 -lina-schedule="tile-v=128 warps=8 prefetch=1 segments=4 mma=warpgroup" -lina-warpgroup-roles | FileCheck %s
// RUN: lina-opt %s -lina-chunk=chunk-size=64 -lina-schedule="tile-v=128 warps=8 prefetch=1 segments=4 mma=warpgroup" -lina-warpgroup-roles -lina-warpgroup-groups | lina-translate --emit-cuda | FileCheck %s --check-prefix=SEGMENTS
// RUN: lina-opt %s -lina-chunk=chunk-size=64 -lina-schedule="tile-v=128 warps=8 prefetch=1 mma=warpgroup" -lina-warpgroup-roles -lina-warpgroup-groups | lina-translate --emit-cuda | FileCheck %s --check-prefix=EMIT

// RetNet's fixed decay with a sigmoid write weight, which no hand-written
// kernel covers: every op gets its part in the warpgroup scan. q, k and v
// are fetched; the write weight, the query's scale and the decays are row
// factors of those tiles; the gates and betas are per-token columns; the
// five ops left are the products and their sums. Recorded twice, the same,
// and the same for a sequence run in segments.
// CHECK-LABEL: lina.chunked @retnet_write_gate
// CHECK: lina.load q {lina.warpgroup = "fetch"}
// CHECK: lina.load k {lina.warpgroup = "fetch"}
// CHECK: lina.load v {lina.warpgroup = "fetch"}
// CHECK: lina.scale {{.*}} {lina.warpgroup = "row_factor"}
// CHECK: lina.load g {lina.warpgroup = "column"}
// CHECK: lina.cumsum {{.*}} {lina.warpgroup = "column"}
// CHECK: lina.load beta {lina.warpgroup = "column"}
// CHECK: lina.beta sigmoid {{.*}} {lina.warpgroup = "column"}
// CHECK: lina.scale_rows {{.*}} {lina.warpgroup = "row_factor"}
// CHECK: lina.decay_product {{.*}} {lina.warpgroup = "scores"}
// CHECK: lina.decay_state {{.*}} {lina.warpgroup = "decay"}
// CHECK: lina.decay_rows {{.*}} {lina.warpgroup = "row_factor", to_end}
// CHECK: lina.matmul {{.*}} {lina.warpgroup = "update", transpose_lhs}
// CHECK: lina.add {{.*}} {lina.warpgroup = "next"}
// CHECK: lina.decay_rows {{.*}} {lina.warpgroup = "row_factor"}
// CHECK: lina.matmul {{.*}} {lina.warpgroup = "state_product"}
// CHECK: lina.matmul {{.*}} {lina.warpgroup = "intra"}
// CHECK: lina.add {{.*}} {lina.warpgroup = "output"}
// CHECK: lina.store o, {{.*}} {lina.warpgroup = "store"}
// CHECK-NEXT: lina.yield

// Without warpgroup products no op has a part, and a schedule that drops
// them drops the records.
// MMA-NOT: lina.warpgroup

// The printer applies each factor where its product lands: the write
// weight (the beta column's sigmoid, tabulated) on P's key tokens and on
// K~'s rows, with the decays; the query's scale on P and on the output's
// token columns; the state's decay at the chunk's last token, applied
// while the landed tiles' products run (they read its packed copy).
// EMIT-LABEL: lina_chunk_fused(lina::Params p, const __grid_constant__ lina::wg_maps maps)
// EMIT: copy_async<4>(raw + (stage * 1 + 0) * 64 + r, p.beta
// EMIT: const wg_column c0 = wg_column_fill(p.g[hv], n);
// EMIT: const wg_column c1 = c0.cumsum(n, false);
// EMIT: const wg_column c2 = wg_column_of(raw + (stage * 1 + 0) * 64);
// EMIT: const wg_column c3 = wg_column_map(c2, n, [&](float x) { return 1.000000000e+00f * sigmoid(x); });
// Row factors that cost more than a load are evaluated once a row into a
// warp's table, which the per-element loops read.
// EMIT: wg_column_rows(n, [&](int r) { return __expf(tab1[r]) * 8.838834765e-02f; }).store(mine + 128);
// EMIT: wg_column_rows(n, [&](int r) { return __expf(last1 - tab1[r]) * tab3[r]; }).store(mine + 192);
// EMIT: const float f = __expf(last1);
// EMIT: wg_scale_rows<K>(ktilde, kt, n, [&](int r) { return ftab1[r]; });
// EMIT: return wg_kept(u <= t, 8.838834765e-02f * tab3[u] * __expf(tab1[t] - tab1[u]));
// EMIT: wg_scale_columns(oacc, [&](int t) { return ftab0[t]; });
// EMIT: wg_issue_intra(oacc, vt, ptile, wg);
// EMIT-NEXT: wg_issue_update<K>(s, vt, ktilde, wg);

// In segments each chunk also stores its record for the combine and carry
// kernels: X, q's rows with the state product's factors, and the decay.
// SEGMENTS: wg_column_rows(n, [&](int r) { return __expf(tab1[r]) * 8.838834765e-02f; }).store(mine + 128);
// SEGMENTS: wg_store_rows<K>(rec, qt, n, [&](int r) { return ftab0[r]; });
// SEGMENTS: rec[C * K / 2] = __expf(last1);

lina.recurrence @retnet_write_gate <decay = fixed, update = additive, beta = sigmoid, write = beta, key_dim = 128, value_dim = 128, heads = 4, value_heads = 4, dtype = bf16, initial_state = true, final_state = true>
