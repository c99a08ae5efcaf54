// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-schedule="tile-v=16 strategy=split" -lina-cut-state | FileCheck %s
// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-schedule="tile-v=16 strategy=split" -lina-cut-state -lina-schedule="tile-v=16 strategy=fused" -lina-cut-state | FileCheck %s --check-prefix=FUSED
// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-schedule="tile-v=16 strategy=materialize" -lina-cut-state | FileCheck %s --check-prefix=FUSED

// Gated DeltaNet, cut at the state: the UT transform's solves, the
// intra-chunk decay product and the decayed keys and queries cross to the
// scan through the workspace; loads, the beta scaling and the norms'
// elementwise work stay in the scan; the gate sums cross as their last row,
// which is all the scan needs to decay the state.
// CHECK-LABEL: lina.chunked @gdn
// CHECK-SAME: strategy = split
// CHECK: lina.load q : <16x16>
// CHECK-NOT: lina.cut
// CHECK: lina.cumsum %{{.*}} {lina.cut = "last_row"} : <16x1>
// CHECK: %[[W:.*]] = lina.tri_solve %{{.*}}, %{{.*}} {lina.cut = "stored"}
// CHECK: %[[U:.*]] = lina.tri_solve %{{.*}}, %{{.*}} {lina.cut = "stored"}
// CHECK: lina.matmul %[[W]], %arg0 : <16x16>, <16x16> -> <16x16>
// CHECK: lina.decay_product {{.*}} inclusive {lina.cut = "stored"}
// CHECK: lina.decay_rows {{.*}} {lina.cut = "stored", to_end}
// CHECK: lina.decay_rows {{.*}} {lina.cut = "stored"}
// CHECK: lina.yield
lina.recurrence @gdn <decay = scalar, update = delta, beta = given, qk_l2norm = true, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true>

// Mamba-2 with value columns past the chunk: the intra-chunk output P v is
// redone in the scan from the stored P (it is the base of q S's sum), so
// the product with v carries no cut.
// CHECK-LABEL: lina.chunked @mamba2
// CHECK: %[[P:.*]] = lina.decay_product {{.*}} {lina.cut = "stored"}
// CHECK: lina.matmul %[[P]], %{{[0-9]+}} : <16x16>, <16x32> -> <16x32>
// CHECK-NEXT: lina.add
lina.recurrence @mamba2 <decay = scalar, update = additive, key_dim = 16, value_dim = 32, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true>

// The other strategies keep no record, and a new schedule clears an old one.
// FUSED-NOT: lina.cut
