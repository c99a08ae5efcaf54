// RUN: lina-opt %s -split-input-file -verify-diagnostics -lina-warpgroup-groups
// RUN: not lina-opt %S/lina-warpgroup-roles.mlir -lina-chunk=chunk-size=64 -lina-schedule="tile-v=128 warps=8 prefetch=1 mma=warpgroup" -lina-warpgroup-groups 2>&1 | FileCheck %s --check-prefix=NOROLES
// RUN: lina compile linear_attn --dtype f16 --mma warpgroup --emit mlir | sed 's/"update", lina.wg_group = 3/"update", lina.wg_group = 0/' \
// RUN:   | not lina-translate --emit-cuda 2>&1 | FileCheck %s --check-prefix=LATE
// RUN: lina compile linear_attn --dtype f16 --mma warpgroup --emit mlir | sed 's/"state_product", lina.wg_group = 1/"state_product", lina.wg_group = 0/' \
// RUN:   | not lina-translate --emit-cuda 2>&1 | FileCheck %s --check-prefix=SHARED
// RUN: lina compile linear_attn --dtype f16 --mma warpgroup --emit mlir | sed 's/"scores", lina.wg_group = 0 : i64/"scores"/' \
// RUN:   | not lina-translate --emit-cuda 2>&1 | FileCheck %s --check-prefix=UNRECORDED
// RUN: lina compile linear_attn --dtype f16 --mma warpgroup --emit mlir | sed 's/"scores", lina.wg_group = 0/"scores", lina.wg_group = 1/; s/"state_product", lina.wg_group = 1/"state_product", lina.wg_group = 0/' \
// RUN:   | lina-translate --emit-cuda | FileCheck %s --check-prefix=SWAPPED

// The records are checked where they are read back: by the dialect's
// verifier, and by the printer, which issues the products in their groups'
// order and refuses an order the kernel cannot keep: the update with the
// landed tiles' products, two products in one group, a product without
// its group.
// LATE: 'lina.matmul' (update) is recorded in commit group 0, which the scan cannot issue it in: the chunk's first 2 groups are the products of its landed tiles, then the intra-chunk product and the update (run -lina-warpgroup-groups)
// SHARED: two of the warpgroup scan's products are recorded in one commit group (run -lina-warpgroup-groups)
// UNRECORDED: 'lina.decay_product' (scores) carries no 'lina.wg_group' commit group (run -lina-warpgroup-groups first)

// The landed tiles' products in the other order are an order the kernel
// can keep: X S first, and each wait counted from it (the scores with none
// in flight, X S, landed before them, likewise).
// SWAPPED: wg_issue_state_product<K>(oacc, a, qt);
// SWAPPED-NEXT: wg_issue_scores<K, W>(pacc, qt, kt, wg);
// SWAPPED: wg_wait<0>();
// SWAPPED-NEXT: wg_store_scores<W>(
// SWAPPED: wg_wait<1>();
// SWAPPED-NEXT: wg_scale_columns(oacc,

// The pass orders what lina-warpgroup-roles recorded, and names the pass
// where a chunk that prints the scan carries no roles.
// NOROLES: error: warpgroup scan: the chunk's ops carry no 'lina.warpgroup' parts (run -lina-warpgroup-roles first)

lina.chunked @la <decay = none, update = additive, key_dim = 128, value_dim = 128, heads = 1, value_heads = 1, dtype = f16, initial_state = true, final_state = true> chunk_size(64) schedule <tile_v = 128, warps = 8, prefetch = true, mma = warpgroup> {
^bb0(%s: !lina.tile<128x128>):
  // expected-error @+1 {{'lina.wg_group' must be a commit group, an i64 of 0 or more, got -1 : i64}}
  %k = lina.load k {lina.warpgroup = "fetch", lina.wg_group = -1 : i64} : <64x128>
  lina.yield %s : <128x128>
}

// -----

lina.chunked @la <decay = none, update = additive, key_dim = 128, value_dim = 128, heads = 1, value_heads = 1, dtype = f16, initial_state = true, final_state = true> chunk_size(64) schedule <tile_v = 128, warps = 8, prefetch = true, mma = warpgroup> {
^bb0(%s: !lina.tile<128x128>):
  // expected-error @+1 {{'lina.wg_group' belongs on a product of the warpgroup scan (lina.warpgroup "scores", "state_product", "intra", "update", "residual_product", "solve" or "residual_intra")}}
  %k = lina.load k {lina.warpgroup = "fetch", lina.wg_group = 0 : i64} : <64x128>
  lina.yield %s : <128x128>
}
