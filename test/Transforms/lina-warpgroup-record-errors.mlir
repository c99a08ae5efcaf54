// RUN: lina-opt %s -split-input-file -verify-diagnostics
// RUN: not lina-opt %S/lina-warpgroup-record.mlir -lina-chunk=chunk-size=64 -lina-schedule="tile-v=128 warps=8 prefetch=1 mma=warpgroup" -lina-solve-residual -lina-warpgroup-record 2>&1 | FileCheck %s --check-prefix=NOROLES
// RUN: lina compile gdn --dtype f16 --mma warpgroup --emit mlir | sed 's/, lina.wg_record = 1 : i64//' \
// RUN:   | not lina-translate --emit-cuda 2>&1 | FileCheck %s --check-prefix=UNRECORDED
// RUN: lina compile gdn --dtype f16 --mma warpgroup --emit mlir | sed 's/lina.wg_record = 2 : i64/lina.wg_record = 1 : i64/' \
// RUN:   | not lina-translate --emit-cuda 2>&1 | FileCheck %s --check-prefix=SHARED
// RUN: lina compile gdn --dtype f16 --mma warpgroup --emit mlir | sed 's/lina.load g {lina.warpgroup = "column"}/lina.load g {lina.warpgroup = "column", lina.wg_record = 3 : i64}/' \
// RUN:   | not lina-translate --emit-cuda 2>&1 | FileCheck %s --check-prefix=UNREAD
// RUN: lina compile gdn --dtype f16 --mma warpgroup --emit mlir | sed 's/lina.wg_record = 0 : i64/lina.wg_record = 5 : i64/' \
// RUN:   | not lina-translate --emit-cuda 2>&1 | FileCheck %s --check-prefix=PAST
// RUN: lina compile gdn --dtype f16 --mma warpgroup --emit mlir | sed 's/lina.wg_record = 0 : i64/lina.wg_record = 2 : i64/; s/lina.wg_record = 2 : i64} : <64x1>/lina.wg_record = 0 : i64} : <64x1>/' \
// RUN:   | lina-translate --emit-cuda | FileCheck %s --check-prefix=SWAPPED

// The records are checked where they are read back: by the dialect's
// verifier, and by both printed kernels, which must agree on the record's
// layout: a value the scan reads without its slot, two values in one slot,
// a value the scan does not read, a slot past the record's end.
// UNRECORDED: error: 'lina.cumsum' carries no 'lina.wg_record' slot, but the scan reads its value from the chunk's record (run -lina-warpgroup-record first)
// SHARED: error: {{.*}} is recorded in slot 1 of the chunk's record, which holds 5 values a slot each (run -lina-warpgroup-record)
// UNREAD: error: 'lina.load' is recorded in the chunk's record, which carries only the columns the scan reads, k's rows' norms and the products of k's row factors (run -lina-warpgroup-record)
// PAST: error: 'lina.l2norm' is recorded in slot 5 of the chunk's record, which holds 5 values a slot each (run -lina-warpgroup-record)

// The slots in another order are a layout both kernels keep: the prepare
// kernel stores each value in its slot, the scan reads it there.
// SWAPPED-LABEL: lina_chunk_prepare(
// SWAPPED: c2.store(record + 2048 + 0 * 64);
// SWAPPED: record[2048 + 2 * 64 + tid] = norms[0 * 64 + tid];
// SWAPPED-LABEL: lina_chunk_split_scan(
// SWAPPED: wg_residual(racc, yacc, vt, wg, n, [&](int t) { return rec0[t]; },

// The pass reads what lina-warpgroup-roles recorded, and names the pass
// where a chunk that prints the scan carries no roles.
// NOROLES: error: warpgroup scan: the chunk's ops carry no 'lina.warpgroup' parts (run -lina-warpgroup-roles first)

lina.chunked @dn <decay = none, update = delta, beta = given, key_dim = 128, value_dim = 128, heads = 1, value_heads = 1, dtype = f16, initial_state = true, final_state = true> chunk_size(64) schedule <tile_v = 128, warps = 8, prefetch = true, mma = warpgroup> {
^bb0(%s: !lina.tile<128x128>):
  // expected-error @+1 {{'lina.wg_record' must be a slot of the chunk's record, an i64 of 0 or more, got -1 : i64}}
  %b = lina.load beta {lina.warpgroup = "column", lina.wg_record = -1 : i64} : <64x1>
  lina.yield %s : <128x128>
}

// -----

lina.chunked @dn <decay = none, update = delta, beta = given, key_dim = 128, value_dim = 128, heads = 1, value_heads = 1, dtype = f16, initial_state = true, final_state = true> chunk_size(64) schedule <tile_v = 128, warps = 8, prefetch = true, mma = warpgroup> {
^bb0(%s: !lina.tile<128x128>):
  // expected-error @+1 {{'lina.wg_record' belongs on a per-token column, a row factor or, with a per-channel decay, a prepared operand of the warpgroup scan (lina.warpgroup "column", "row_factor", "prepared", "scores", "decay" or "solve")}}
  %k = lina.load k {lina.warpgroup = "fetch", lina.wg_record = 0 : i64} : <64x128>
  lina.yield %s : <128x128>
}
