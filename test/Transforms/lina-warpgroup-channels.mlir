// RUN: lina-opt %s -split-input-file -lina-chunk=chunk-size=64 -lina-schedule="tile-v=64 warps=4 prefetch=1 mma=warpgroup" -lina-solve-residual -lina-warpgroup-roles -lina-warpgroup-groups -lina-warpgroup-record | FileCheck %s
// RUN: lina-opt %s -split-input-file -lina-chunk=chunk-size=64 -lina-schedule="tile-v=64 warps=4 prefetch=1 mma=warpgroup" -lina-solve-residual -lina-warpgroup-roles -lina-warpgroup-groups -lina-warpgroup-record -lina-warpgroup-roles -lina-warpgroup-groups -lina-warpgroup-record | FileCheck %s
// RUN: lina-opt %s -split-input-file -lina-chunk=chunk-size=64 -lina-schedule="tile-v=64 warps=4 prefetch=1 mma=warpgroup" -lina-solve-residual -lina-warpgroup-roles -lina-warpgroup-groups -lina-warpgroup-record | lina-translate --emit-cuda -split-input-file | FileCheck %s --check-prefix=EMIT

// GLA with a sigmoid write weight at d64. A per-channel decay does not
// factor into a row's and a column's, so the prepare kernel applies every
// factor of q's and k's rows ("prepared") and sums the gates a key channel
// ("channel"); the scan fetches only v. Its record carries, in program
// order, P, the state's decay, K~ and X; the scores are no product of the
// scan, so its products' groups start at X S. Recorded twice, the same.
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
// slots (P 8 KB, the decay 1 KB, K~ and X 8 KB each at d64). P's scores go
// straight to the record, its blocks above the diagonal zeroed there.
// EMIT-LABEL: lina_chunk_prepare(
// The tiles and the gates' inputs are copied together, then summed.
// EMIT: wg_copy_rows<K>(sm.tiles[0], (const mma_t *)p.q + (t0 * 2 + kh) * K, (i64)2 * K, n);
// EMIT-NEXT: wg_copy_rows<K>(sm.tiles[1], (const mma_t *)p.k + (t0 * 2 + kh) * K, (i64)2 * K, n);
// EMIT-NEXT: wg_channel_gates_copy<K>(sm, p.g + (t0 * 2 + hv) * (i64)K, (i64)2 * K, n);
// EMIT-NEXT: copies_issued();
// EMIT: copies_landed<0>();
// EMIT-NEXT: __syncthreads();
// EMIT: wg_channel_gates<K, true>(sm, n, false, [&](int r, int c, float x) { return x; });
// EMIT: unsigned char *record = {{.*}} * (i64)(6400));
// EMIT: wg_channel_decay<K>((float *)(record + 8192), sm, n);
// The rows' chains in one pass.
// EMIT: wg_channel_rows_each<K>(sm, n,
// EMIT: wg_rows<1, 0, 0>(record + 17408, sm.tiles[0], [&](int r) { return 1.250000000e-01f; }),
// EMIT: wg_rows<-1, 1, 0>(record + 9216, sm.tiles[1], [&](int r) { return tab1[r]; }));
// EMIT: wg_zero_box_above(record + 0);
// EMIT-NEXT: wg_channel_right<K>(sm, sm.tiles[1]);
// bf16: the scores are bf16 products.
// EMIT-NEXT: wg_channel_scores<K, true>(sm, sm.tiles[1], n,
// EMIT-NEXT: wg_box(sm.tiles[0], false, [&](int t, int u) { return 1.250000000e-01f * tab1[u]; }, [&](int t, int u, float x0, float x1) { wg_put_box(record + 0, t, u, x0, x1); }));
// EMIT-NOT: sm.p
// EMIT: static_assert(sizeof(lina::wg_channel_smem<64>) == 56848
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

// -----

// KDA in f16 with its gate and beta computed in the kernel, at d64. The
// record adds Y of the residual's Y S (with beta and k's norm), beta as the
// residual's factor of v's rows, and T = (I + A)^-1 on the solve; A's
// decay_product stays the solve's matrix, prepared with T.
// CHECK-LABEL: lina.chunked @kda_computed
// CHECK: lina.gate lower_bound {{.*}} {lina.warpgroup = "channel"
// CHECK: lina.cumsum {{.*}} {lina.warpgroup = "channel"}
// CHECK: lina.decay_product {{.*}} strict {lina.warpgroup = "solve_matrix"}
// CHECK: lina.scale_rows {{.*}} {lina.warpgroup = "prepared", lina.wg_record = 0 : i64} : <64x64>, <64x1>
// CHECK: lina.scale_rows {{.*}} {lina.warpgroup = "prepared", lina.wg_record = 1 : i64} : <64x64>, <64x1>
// CHECK: lina.matmul {{.*}} {lina.warpgroup = "residual_product", lina.wg_group = 0 : i64}
// CHECK: lina.tri_solve {{.*}} {lina.warpgroup = "solve", lina.wg_group = 2 : i64, lina.wg_record = 2 : i64}
// CHECK: lina.decay_product {{.*}} inclusive {lina.warpgroup = "scores", lina.wg_record = 3 : i64}
// CHECK: lina.decay_state {{.*}} {lina.warpgroup = "decay", lina.wg_record = 4 : i64}
// CHECK: lina.decay_rows {{.*}} {lina.warpgroup = "prepared", lina.wg_record = 5 : i64, to_end}
// CHECK: lina.decay_rows {{.*}} {lina.warpgroup = "prepared", lina.wg_record = 6 : i64}
// CHECK: lina.matmul {{.*}} {lina.warpgroup = "state_product", lina.wg_group = 1 : i64}

// The prepare kernel computes the gate a channel (its bias a channel), Y,
// beta a row, A into fp32 and T from it; the scan forms the residual with
// beta from the record, solves it with T and feeds U to the output and the
// update.
// EMIT-LABEL: lina_chunk_prepare(
// EMIT: wg_channel_gates<K, true>(sm, n, false, [&](int r, int c, float x) { return -5.000000000e+00f * sigmoid(gate_a * (x + gate_bias_at(c))); });
// EMIT: ((float *)(record + 8192))[tid] = tid < n ? tab1[tid] : 0.0f;
// X, K~ and Y in one pass: Y shares k's tile with K~ and its exponent
// with X.
// EMIT: wg_channel_rows_each<K>(sm, n,
// EMIT-NEXT: // X of X S
// EMIT-NEXT: wg_rows<1, 0, 0>(record + 34816, sm.tiles[0],
// EMIT-NEXT: // K~ of the update
// EMIT-NEXT: wg_rows<-1, 1, 0>(record + 26624, sm.tiles[1],
// EMIT-NEXT: // Y of Y S
// EMIT-NEXT: wg_rows<1, 0, 0>(record + 0, sm.tiles[1], [&](int r) { return tab1[r] * norms[1 * 64 + r]; }));
// P, then A: they share k's rows as their right operand, formed once; in
// f16 (tf32 products) they are summed one after the other, each left
// operand fp32. At d64 q's tile is too small to hold A, which keeps its own
// rows.
// EMIT: wg_channel_right<K>(sm, sm.tiles[1]);
// EMIT-NEXT: wg_channel_scores<K>(sm, sm.tiles[1], n,
// EMIT-NEXT: wg_box(sm.tiles[0], false,
// EMIT-NOT: wg_channel_right
// EMIT: wg_channel_scores<K>(sm, sm.tiles[1], n,
// EMIT-NEXT: wg_box(sm.tiles[1], true, [&](int t, int u) { return tab1[t] * norms[1 * 64 + t] * norms[1 * 64 + u]; }, [&](int t, int u, float x0, float x1) { *(f32x2 *)(a + t * kWgSolveLd + u) = f32x2{x0, x1}; }));
// EMIT: wg_unit_lower_inverse(a, sm.right, sm.gates, [] {});
// EMIT-NEXT: wg_store_box(record + 9216, sm.right);
// EMIT-LABEL: lina_chunk_split_scan(
// EMIT: kRecordBytes = 43008;
// EMIT: wg_issue_state_product<K>(yacc, a, rec + 0);
// EMIT-NEXT: wg_issue_state_product<K>(oacc, a, rec + 34816);
// EMIT: wg_wait<1>();
// EMIT: wg_residual(racc, yacc, vt, wg, n, [&](int t) { return ((const float *)(rec + 8192))[t]; }, [](int) { return 1.0f; });
// EMIT: wg_issue_solve(uacc, rf, rec + 9216);
// EMIT-NEXT: wg_wait<0>();
// EMIT: wg_issue_values_intra(oacc, uf, rec + 17408);
// EMIT-NEXT: wg_issue_values_update<K>(s, uf, rec + 26624);

lina.recurrence @kda_computed <decay = per_channel, gate = lower_bound, update = delta, beta = sigmoid, qk_l2norm = true, key_dim = 64, value_dim = 64, heads = 2, value_heads = 2, dtype = f16, initial_state = true, final_state = true>

// -----

// RWKV-7's DPLR rule with a sigmoid write weight, at d64. The chunk writes
// two terms: the values U = tri_solve(-A, Y S + L V) along b and v's rows
// along k. Y (a decayed to the row before, G's exclusive twin) and L (a's
// scores of the weighted k, its left rows decayed to the row before) are
// the residual's; A's decay_product and its negation stay the solve's
// matrix, prepared with T. The record carries Y, L, T, P of P U, P of P V,
// the decay, B~, K~ and X; v's three products (L V, P V, K~^T V) follow
// the state's, then the solve, then U's two.
// CHECK-LABEL: lina.chunked @rwkv7_write
// CHECK: lina.load a {lina.warpgroup = "prepared"}
// CHECK: lina.load b {lina.warpgroup = "prepared"}
// CHECK: lina.cumsum {{.*}} {exclusive, lina.warpgroup = "channel"}
// CHECK: lina.decay_product {{.*}} strict {lina.warpgroup = "solve_matrix"}
// CHECK: lina.neg {{.*}} {lina.warpgroup = "solve_matrix"}
// CHECK: lina.decay_rows {{.*}} {lina.warpgroup = "prepared", lina.wg_record = 0 : i64}
// CHECK: lina.decay_product {{.*}} strict {lina.warpgroup = "scores", lina.wg_record = 1 : i64}
// CHECK: lina.matmul {{.*}} {lina.warpgroup = "residual_intra", lina.wg_group = 2 : i64}
// CHECK: lina.matmul {{.*}} {lina.warpgroup = "residual_product", lina.wg_group = 0 : i64}
// CHECK: lina.add {{.*}} {lina.warpgroup = "residual"}
// CHECK: lina.tri_solve {{.*}} {lina.warpgroup = "solve", lina.wg_group = 5 : i64, lina.wg_record = 2 : i64}
// CHECK: lina.decay_product {{.*}} inclusive {lina.warpgroup = "scores", lina.wg_record = 3 : i64}
// CHECK: lina.decay_product {{.*}} inclusive {lina.warpgroup = "scores", lina.wg_record = 4 : i64}
// CHECK: lina.decay_state {{.*}} {lina.warpgroup = "decay", lina.wg_record = 5 : i64}
// CHECK: lina.decay_rows {{.*}} {lina.warpgroup = "prepared", lina.wg_record = 6 : i64, to_end}
// CHECK: lina.matmul {{.*}} {lina.warpgroup = "update", lina.wg_group = 7 : i64, transpose_lhs}
// CHECK: lina.add {{.*}} {lina.warpgroup = "next"}
// CHECK: lina.decay_rows {{.*}} {lina.warpgroup = "prepared", lina.wg_record = 7 : i64, to_end}
// CHECK: lina.matmul {{.*}} {lina.warpgroup = "update", lina.wg_group = 4 : i64, transpose_lhs}
// CHECK: lina.add {{.*}} {lina.warpgroup = "next"}
// CHECK: lina.decay_rows {{.*}} {lina.warpgroup = "prepared", lina.wg_record = 8 : i64}
// CHECK: lina.matmul {{.*}} {lina.warpgroup = "state_product", lina.wg_group = 1 : i64}
// CHECK: lina.matmul {{.*}} {lina.warpgroup = "intra", lina.wg_group = 6 : i64}
// CHECK: lina.add {{.*}} {lina.warpgroup = "output"}
// CHECK: lina.matmul {{.*}} {lina.warpgroup = "intra", lina.wg_group = 3 : i64}
// CHECK: lina.add {{.*}} {lina.warpgroup = "output"}

// The prepare kernel fetches a and b beside q and k, decays Y's rows to
// the row before (exponent 1 of G_{r-1}), sums A with its left rows
// decayed to the row before and negated, and L the same way with the
// write weight of its key rows; the scan adds L V onto Y S, P V onto X S
// and K~^T V onto the state before the solve lands.
// EMIT-LABEL: lina_chunk_prepare(
// EMIT: wg_channel_smem<K, 4> &sm
// EMIT: wg_load_rows<K>(sm.tiles[2], (const mma_t *)p.a + (t0 * 2 + hv) * K, (i64)2 * K, n);
// EMIT-NEXT: wg_load_rows<K>(sm.tiles[3], (const mma_t *)p.b + (t0 * 2 + hv) * K, (i64)2 * K, n);
// EMIT: wg_rows<0, 0, 1>(record + 0, sm.tiles[2], [&](int r) { return 1.0f; }),
// EMIT: wg_rows<-1, 1, 0>(record + 50176, sm.tiles[1], [&](int r) { return tab1[r]; }));
// b's right operand once for P and A, summed in one pass (A's left rows
// decayed to the row before: wg_box_before), then k's for L and P of v's,
// the same way: two fp32 left operands fit beside four tiles.
// EMIT: wg_zero_box_above(record + 24576);
// EMIT-NEXT: wg_channel_right<K>(sm, sm.tiles[3]);
// EMIT-NEXT: wg_channel_scores<K>(sm, sm.tiles[3], n,
// EMIT-NEXT: wg_box(sm.tiles[0], false, {{.*}} wg_put_box(record + 24576, t, u, x0, x1); }),
// EMIT-NEXT: wg_box_before(sm.tiles[2], true, [&](int t, int u) { return -1.0f; }, [&](int t, int u, float x0, float x1) { *(f32x2 *)(a + t * kWgSolveLd + u) = f32x2{x0, x1}; }));
// EMIT: wg_zero_box_above(record + 8192);
// EMIT-NEXT: wg_zero_box_above(record + 32768);
// EMIT-NEXT: wg_channel_right<K>(sm, sm.tiles[1]);
// EMIT-NEXT: wg_channel_scores<K>(sm, sm.tiles[1], n,
// EMIT-NEXT: wg_box_before(sm.tiles[2], true, [&](int t, int u) { return tab1[u]; }, [&](int t, int u, float x0, float x1) { wg_put_box(record + 8192, t, u, x0, x1); }),
// EMIT-NEXT: wg_box(sm.tiles[0], false, [&](int t, int u) { return 1.250000000e-01f * tab1[u]; }, {{.*}} wg_put_box(record + 32768, t, u, x0, x1); }));
// EMIT-NOT: wg_channel_scores
// EMIT: wg_store_box(record + 16384, sm.right);
// EMIT: static_assert(sizeof(lina::wg_channel_smem<64, 4>) == 77328
// EMIT-LABEL: lina_chunk_split_scan(
// EMIT: kRecordBytes = 66560;
// EMIT: wg_issue_state_product<K>(yacc, a, rec + 0);
// EMIT-NEXT: wg_issue_state_product<K>(oacc, a, rec + 58368);
// EMIT: wg_wait<0>();
// EMIT-NEXT: wg_issue_intra(yacc, vt, rec + 8192, wg);
// EMIT-NEXT: wg_issue_intra(oacc, vt, rec + 32768, wg);
// EMIT-NEXT: wg_issue_update<K>(s, vt, rec + 50176, wg);
// EMIT: wg_wait<2>();
// EMIT: wg_pack_columns(rf, yacc, [](int) { return 1.0f; });
// EMIT-NEXT: wg_issue_solve(uacc, rf, rec + 16384);
// EMIT-NEXT: wg_wait<0>();
// EMIT: wg_issue_values_intra(oacc, uf, rec + 24576);
// EMIT-NEXT: wg_issue_values_update<K>(s, uf, rec + 41984);

lina.recurrence @rwkv7_write <decay = per_channel, update = dplr, beta = sigmoid, write = beta, key_dim = 64, value_dim = 64, heads = 2, value_heads = 2, dtype = bf16, initial_state = true, final_state = true>

// -----

// DPLR with a scalar decay runs the same pair: its gates and their running
// sums stay per-token columns, which the prepare kernel computes; it sums
// the gate a token over the key channels alike for the scores (their left
// rows still to the row before) and the state's decay, and applies the
// decays of rows as row factors.
// CHECK-LABEL: lina.chunked @rwkv7_scalar
// CHECK: lina.cumsum {{.*}} {lina.warpgroup = "column"} : <64x1>
// CHECK: lina.cumsum {{.*}} {exclusive, lina.warpgroup = "column"} : <64x1>
// CHECK: lina.decay_rows {{.*}} {lina.warpgroup = "prepared", lina.wg_record = 0 : i64} : <64x64>, <64x1>
// CHECK: lina.decay_state {{.*}} {lina.warpgroup = "decay", lina.wg_record = 5 : i64} : <64x64>, <64x1>
// EMIT-LABEL: lina_chunk_prepare(
// EMIT: wg_channel_gates_copy<K>(sm, nullptr, (i64)2 * K, n);
// EMIT: wg_channel_gates<K, false>(sm, n, false, [&](int r, int c, float x) { return tab0[r]; });
// EMIT: wg_channel_decay<K>((float *)(record + 40960), sm, n);
// EMIT: wg_rows<0, 0, 0>(record + 58368, sm.tiles[0], [&](int r) { return __expf(tab1[r]) * 1.250000000e-01f; }),
// EMIT: wg_rows<0, 0, 0>(record + 0, sm.tiles[2], [&](int r) { return __expf(tab2[r]); }),
// EMIT: wg_channel_scores<K>(sm, sm.tiles[3], n,
// EMIT-NEXT: wg_box(sm.tiles[0], false,
// EMIT-NEXT: wg_box_before(sm.tiles[2], true,
// EMIT-LABEL: lina_chunk_split_scan(
// EMIT: wg_decay_key_columns<K>(s, (const float *)(rec + 40960));

lina.recurrence @rwkv7_scalar <decay = scalar, update = dplr, key_dim = 64, value_dim = 64, heads = 2, value_heads = 2, dtype = bf16, initial_state = true, final_state = true>
