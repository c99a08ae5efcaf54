// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-schedule="tile-v=32 warps=8 strategy=split prefetch=1" -lina-cut-state -lina-place-state -lina-pipeline-loads -lina-occupancy -lina-row-passes | FileCheck %s
// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-schedule="tile-v=32 warps=8 strategy=split" -lina-cut-state -lina-row-passes -lina-row-passes | FileCheck %s
// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-schedule="tile-v=32 warps=8 strategy=fused" -lina-row-passes | FileCheck %s --check-prefix=FUSED
// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-schedule="tile-v=32 warps=8 strategy=split" -lina-cut-state -lina-row-passes -lina-schedule="tile-v=32 warps=8 strategy=fused" | FileCheck %s --check-prefix=FUSED
// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-schedule="tile-v=32 warps=8 strategy=split" -lina-cut-state -lina-row-passes | lina-translate --emit-cuda | FileCheck %s --check-prefix=EMIT

// Gated DeltaNet's prepare kernel chains its row-wise ops in three row
// passes, one for each input it fetches into registers: q normalised,
// scaled and decayed to the chunk's start (pass 0); k normalised, decayed
// both ways and weighted by beta (pass 1); v weighted by beta (pass 2).
// The gates' cumulative sum and the chunk-square products are no row-wise
// ops and keep no record. Planned twice, the same.
// CHECK-LABEL: lina.chunked @gdn
// CHECK: lina.load q {lina.row_pass = 0 : i64}
// CHECK: lina.load k {lina.row_pass = 1 : i64}
// CHECK: lina.load v {lina.row_pass = 2 : i64}
// CHECK: lina.l2norm {{.*}} {lina.row_pass = 0 : i64}
// CHECK: lina.l2norm {{.*}} {lina.row_pass = 1 : i64}
// CHECK: lina.scale {{.*}} {lina.row_pass = 0 : i64}
// CHECK: lina.cumsum
// CHECK-NOT: row_pass
// CHECK-SAME: :
// CHECK: lina.decay_rows {{.*}} {lina.row_pass = 1 : i64}
// CHECK: lina.scale_rows {{.*}} {lina.row_pass = 1 : i64}
// CHECK: lina.scale_rows {{.*}} {lina.row_pass = 2 : i64}
// CHECK: lina.matmul
// CHECK-NOT: row_pass
// CHECK-SAME: :
// CHECK: lina.decay_rows {{.*}} {lina.cut = "stored", lina.row_pass = 0 : i64} :

// A fused schedule runs no prepare kernel: no records, and a schedule
// that replaces a split one drops them.
// FUSED-NOT: lina.row_pass

// The emitter prints the three passes as recorded: the inputs' rows fetched
// into registers at the top of the prepare kernel.
// EMIT-LABEL: void {{.*}}lina_chunk_prepare(
// EMIT-COUNT-3: row_fetch<

lina.recurrence @gdn <decay = scalar, update = delta, beta = given, qk_l2norm = true, key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = bf16, initial_state = true, final_state = true>
