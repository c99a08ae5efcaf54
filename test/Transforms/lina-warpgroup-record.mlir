// RUN: lina-opt %s -split-input-file -lina-chunk=chunk-size=64 -lina-schedule="tile-v=128 warps=8 prefetch=1 mma=warpgroup" -lina-solve-residual -lina-warpgroup-roles -lina-warpgroup-groups -lina-warpgroup-record | FileCheck %s
// RUN: lina-opt %s -split-input-file -lina-chunk=chunk-size=64 -lina-schedule="tile-v=128 warps=8 prefetch=1 mma=warpgroup" -lina-solve-residual -lina-warpgroup-roles -lina-warpgroup-groups -lina-warpgroup-record -lina-warpgroup-record | FileCheck %s
// RUN: lina-opt %s -split-input-file -lina-chunk=chunk-size=64 -lina-schedule="tile-v=128 warps=8 prefetch=1" -lina-solve-residual -lina-warpgroup-roles -lina-warpgroup-record | FileCheck %s --check-prefix=MMA
// RUN: lina compile gdn --dtype f16 --mma warpgroup --emit cuda | FileCheck %s --check-prefix=GDN

// The delta rule's prepare kernel computes the columns the scan reads, the
// norms of k's rows and the products of k's row factors that the scan's
// products read into each chunk's record, a slot each in program order:
// here k's norms, the gates' running sum, the sigmoid beta, Y's factors
// (the residual's: beta exp(G) / |k|) and K~'s (the update's: exp(G_last -
// G) / |k|). The gates as loaded feed only their running sum, a column,
// and are not carried; the scores read k's norms alone, a slot already.
// Recorded twice, the same.
// CHECK-LABEL: lina.chunked @delta_gated_write
// CHECK: lina.l2norm {{.*}} {lina.warpgroup = "row_factor", lina.wg_record = 0 : i64}
// CHECK: lina.load g {lina.warpgroup = "column"}
// CHECK: lina.cumsum {{.*}} {lina.warpgroup = "column", lina.wg_record = 1 : i64}
// CHECK: lina.load beta {lina.warpgroup = "column"}
// CHECK: lina.beta sigmoid {{.*}} {lina.warpgroup = "column", lina.wg_record = 2 : i64}
// CHECK: lina.scale_rows {{.*}} {lina.warpgroup = "row_factor", lina.wg_record = 3 : i64} : <64x128>, <64x1>
// CHECK: lina.decay_rows {{.*}} {lina.warpgroup = "row_factor", lina.wg_record = 4 : i64, to_end}

// The additive rule has no prepare kernel: nothing to carry.
// CHECK-LABEL: lina.chunked @retnet_write_gate
// CHECK-NOT: lina.wg_record
// CHECK: lina.yield

// Without warpgroup products there is no record.
// MMA-NOT: lina.wg_record

// Gated DeltaNet: the prepare kernel stores the record's values after T
// (warp 0's copy of each column, the norms, each chain's product a row),
// the scan copies the whole record with T and reads the gates' sum, beta,
// k's norms and the products from it: it no longer copies the gates and
// betas a token, sums the gates, normalises k or tabulates k's factors,
// and normalises only q.
// GDN-LABEL: lina_chunk_prepare(
// GDN: float *record = p.chunk_data + {{.*}} * (i64)(2368);
// GDN: record[2048 + 0 * 64 + tid] = norms[0 * 64 + tid];
// GDN: c1.store(record + 2048 + 1 * 64);
// GDN: c2.store(record + 2048 + 2 * 64);
// GDN: record[2048 + 3 * 64 + tid] = tid < n ? tab2[tid] * __expf(tab1[tid]) * norms[0 * 64 + tid] : 0.0f;
// GDN: record[2048 + 4 * 64 + tid] = tid < n ? __expf(last1 - tab1[tid]) * norms[0 * 64 + tid] : 0.0f;
// GDN: wg_store_box((unsigned char *)record, t);
// GDN-LABEL: lina_chunk_split_scan(
// GDN: kRecordBytes = kSolveBytes + 5 * 64 * 4;
// GDN-NOT: copy_async<4>(raw
// GDN: bulk_copy(at + 2 * kKeyTile + C * VT * 2, {{.*}} * (i64)(2368), kRecordBytes, &landed[stage]);
// GDN: wg_row_norms<K>(norms + 0 * 64, qt);
// GDN-NOT: wg_row_norms
// GDN-NOT: cumsum
// GDN: const float *rec2 = (const float *)(vt + C * VT * 2 + kSolveBytes) + 2 * 64;
// GDN: const float f = __expf(rec1[n - 1]);
// GDN: wg_residual(racc, yacc, vt, wg, n, [&](int t) { return rec2[t]; }, [&](int t) { return rec3[t]; });
// GDN: wg_pack_columns(ukf, uacc, [&](int r) { return rec4[r]; });
// GDN: wg_issue_values_intra(oacc, uf, ptile);
// GDN-NEXT: wg_issue_values_update<K>(s, ukf, kt);

lina.recurrence @delta_gated_write <decay = fixed, update = delta, beta = sigmoid, qk_l2norm = true, key_dim = 128, value_dim = 128, heads = 4, value_heads = 4, dtype = bf16, initial_state = true, final_state = true>

// -----

lina.recurrence @retnet_write_gate <decay = fixed, update = additive, beta = sigmoid, write = beta, key_dim = 128, value_dim = 128, heads = 4, value_heads = 4, dtype = bf16, initial_state = true, final_state = true>
