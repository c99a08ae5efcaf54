// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-schedule="tile-v=32 warps=4 strategy=fused" -lina-place-state | FileCheck %s --check-prefix=FUSED
// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-schedule="tile-v=32 warps=4 strategy=split" -lina-cut-state -lina-place-state | FileCheck %s --check-prefix=SPLIT
// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-schedule="tile-v=32 warps=4 strategy=materialize" -lina-place-state | FileCheck %s --check-prefix=SHARED
// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-schedule="tile-v=32 warps=4 strategy=fused shared-state=1" -lina-place-state | FileCheck %s --check-prefix=SHARED
// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-schedule="tile-v=8 warps=4 strategy=fused" -lina-place-state | FileCheck %s --check-prefix=SHARED
// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-schedule="tile-v=32 warps=4 strategy=fused" -lina-place-state -lina-schedule="tile-v=32 warps=4 strategy=fused shared-state=1" | FileCheck %s --check-prefix=SHARED

// Where the kernel that walks the chunks keeps the state. Gated DeltaNet's
// chunk only multiplies the state from the right (W S, q S), decays it and
// adds K^T U to it, so its fused kernel and its split scan hold S^T as the
// tensor cores' accumulators: 32 value columns are two 16-row tiles, and
// the four warps split the 64 key columns in two 32-column halves.
// FUSED: lina.chunked @gdn {{.*}} attributes {lina.state = "registers"}
// SPLIT: lina.chunked @gdn {{.*}}strategy = split{{.*}} attributes {lina.state = "registers"}
lina.recurrence @gdn <decay = scalar, update = delta, beta = given, qk_l2norm = true, key_dim = 64, value_dim = 32, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true>

// f32 products run on the CUDA cores, with no accumulators to hold the
// state in.
// FUSED-NOT: lina.chunked @gdn_f32 {{.*}}lina.state
// SPLIT-NOT: lina.chunked @gdn_f32 {{.*}}lina.state
lina.recurrence @gdn_f32 <decay = scalar, update = delta, beta = given, qk_l2norm = true, key_dim = 64, value_dim = 32, heads = 1, value_heads = 1, dtype = f32, initial_state = true, final_state = true>

// The materialize strategy carries the state through a workspace, not a
// kernel that walks the chunks; shared-state keeps it in shared memory for
// comparison; 8 value columns do not fill a 16-row accumulator tile; and a
// new schedule drops the record made for the old one.
// SHARED-NOT: lina.state
