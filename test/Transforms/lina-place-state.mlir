// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-schedule="tile-v=32 warps=8 strategy=split" -lina-cut-state -lina-place-state | FileCheck %s --check-prefix=SPLIT
// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-schedule="tile-v=32 warps=2 strategy=split" -lina-cut-state -lina-place-state | FileCheck %s --check-prefix=OWN
// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-schedule="tile-v=32 warps=4 strategy=fused" -lina-place-state | FileCheck %s --check-prefix=FUSED
// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-schedule="tile-v=32 warps=4 strategy=materialize" -lina-place-state | FileCheck %s --check-prefix=SHARED
// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-schedule="tile-v=32 warps=4 strategy=fused shared-state=1" -lina-place-state | FileCheck %s --check-prefix=SHARED
// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-schedule="tile-v=8 warps=4 strategy=fused" -lina-place-state | FileCheck %s --check-prefix=SHARED
// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-schedule="tile-v=32 warps=4 strategy=fused" -lina-place-state -lina-schedule="tile-v=32 warps=4 strategy=fused shared-state=1" | FileCheck %s --check-prefix=SHARED

// Where the kernel that walks the chunks keeps the state, and how its ops
// use it. Gated DeltaNet's chunk only multiplies the state from the right
// (W S, q S), decays it and adds K^T U to it, so its split scan holds S^T as
// the tensor cores' accumulators: 32 value columns are two 16-row tiles,
// and eight warps split the 64 key columns four ways. u - W S is done in
// W S's reduction (epilogue); K^T U goes straight into the accumulators
// (folded into the add); q S's partial sums are made in W S's call, which
// has q already (hoisted), and the intra-chunk product P U sums them in its
// own epilogue (reduces), before the output's add (epilogue).
// SPLIT: lina.chunked @gdn {{.*}}strategy = split> placement <state = registers> {
// SPLIT: %[[WS:.*]] = lina.matmul %{{.*}}, %arg0 {lina.state_use = "product"}
// SPLIT-NEXT: %[[U:.*]] = lina.sub %{{.*}}, %[[WS]] {lina.state_use = "epilogue"}
// SPLIT: %[[D:.*]] = lina.decay_state %arg0
// SPLIT-NOT: state_use
// SPLIT: %[[KU:.*]] = lina.matmul %{{.*}}, %[[U]] {lina.state_use = "folded", transpose_lhs}
// SPLIT-NEXT: %[[S:.*]] = lina.add %[[D]], %[[KU]] :
// SPLIT: %[[QS:.*]] = lina.matmul %{{.*}}, %arg0 {lina.state_use = "hoisted"}
// SPLIT-NEXT: %[[PU:.*]] = lina.matmul %{{.*}}, %[[U]] {lina.state_use = "reduces"}
// SPLIT-NEXT: lina.add %[[QS]], %[[PU]] {lina.state_use = "epilogue"}
// SPLIT: lina.yield %[[S]]

// Two warps own all 64 key columns of their 16 value columns: no partial
// sums to hoist; P U computes P U + q S in registers and writes the output.
// OWN: lina.chunked @gdn {{.*}} placement <state = registers> {
// OWN: lina.matmul %{{.*}}, %arg0 {lina.state_use = "product"}
// OWN: lina.matmul %{{.*}}, %arg0 {lina.state_use = "product"}
// OWN-NEXT: lina.matmul %{{.*}} {lina.state_use = "fused"}
// OWN-NEXT: lina.add {{.*}} {lina.state_use = "epilogue"}

// The fused kernel runs the whole chunk: u - W S is not next to W S there,
// so it stays an op of its own.
// FUSED: lina.chunked @gdn {{.*}} placement <state = registers> {
// FUSED: lina.matmul %{{.*}}, %arg0 {lina.state_use = "product"}
// FUSED-NEXT: lina.sub
// FUSED-NOT: state_use
// FUSED: lina.matmul {{.*}} {lina.state_use = "folded", transpose_lhs}
lina.recurrence @gdn <decay = scalar, update = delta, beta = given, qk_l2norm = true, key_dim = 64, value_dim = 32, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true>

// f32 products run on the CUDA cores, with no accumulators to hold the
// state in.
// FUSED-LABEL: lina.chunked @gdn_f32
// FUSED-NOT: placement
// SPLIT-LABEL: lina.chunked @gdn_f32
// SPLIT-NOT: placement
lina.recurrence @gdn_f32 <decay = scalar, update = delta, beta = given, qk_l2norm = true, key_dim = 64, value_dim = 32, heads = 1, value_heads = 1, dtype = f32, initial_state = true, final_state = true>

// The materialize strategy carries the state through a workspace, not a
// kernel that walks the chunks; shared-state keeps it in shared memory for
// comparison; 8 value columns do not fill a 16-row accumulator tile; and a
// new schedule drops the records made for the old one.
// SHARED-NOT: {{placement|lina.state_use}}
