// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-chunk-backward -lina-schedule="tile-v=8 warps=2 strategy=materialize" | FileCheck %s
// RUN: not lina-opt %s -lina-chunk=chunk-size=16 -lina-chunk-backward -lina-schedule="tile-v=12" 2>&1 | FileCheck %s --check-prefix=BADTILE

// The schedule pass lays out the backward as it does the forward: value
// columns a CTA and warps, recorded as the op's #lina.schedule for the
// emitter (options at their default not printed).
// CHECK: lina.chunked @gdn {{.*}} chunk_size(16) schedule <tile_v = 8, warps = 2, strategy = materialize> {
// CHECK: lina.chunked_backward @gdn_backward {{.*}} chunk_size(16) schedule <tile_v = 8, warps = 2> {

// A layout that does not divide the value columns is refused.
// BADTILE: error: lina-schedule: tile-v (12) must be a multiple of 8 dividing value_dim (16)
lina.recurrence @gdn <decay = scalar, update = delta, beta = given, qk_l2norm = true, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16>
