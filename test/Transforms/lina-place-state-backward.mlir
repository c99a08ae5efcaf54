// RUN: lina-opt %s -split-input-file -lina-chunk=chunk-size=16 -lina-chunk-backward -lina-fuse-sums -lina-schedule="tile-v=32 warps=4 strategy=materialize" -lina-cut-state -lina-place-state | FileCheck %s
// RUN: lina-opt %s -split-input-file -lina-chunk=chunk-size=16 -lina-chunk-backward -lina-fuse-sums -lina-schedule="tile-v=32 warps=4 strategy=materialize" -lina-cut-state -lina-place-state -lina-place-state | FileCheck %s
// RUN: lina-opt %s -split-input-file -lina-chunk=chunk-size=16 -lina-chunk-backward -lina-fuse-sums -lina-schedule="tile-v=32 warps=4 strategy=materialize" -lina-cut-state -lina-place-state -lina-pack-states -lina-global-tiles | lina-translate --split-input-file --emit-cuda-backward | FileCheck %s --check-prefix=EMIT
// RUN: lina-opt %s -split-input-file -lina-chunk=chunk-size=16 -lina-chunk-backward -lina-fuse-sums -lina-schedule="tile-v=8 warps=4 strategy=materialize" -lina-cut-state -lina-place-state | FileCheck %s --check-prefix=SHARED

// The backward's reverse scan carries dL/dS from the last chunk to the
// first, and, like the forward's scan, only multiplies it from the right
// (W dS), decays it and adds products Y^T Z to it (Q^T dO and K^T dV, in
// one lina.sum): it holds dS^T as the tensor cores' accumulators, the two
// products folded into them. The forward's op is placed for the backward's
// states scan, which walks the chunks writing the state before each: what
// lina-cut-state left it (u - W S, its decay and K^T U), as the forward's
// split scan would hold it. (Alone, the materialize strategy has no kernel
// that walks its chunks: lina-place-state.mlir.)
// CHECK-LABEL: lina.chunked @gdn {{.*}} strategy = materialize> placement <state = registers> {
// CHECK: %[[WS:.*]] = lina.matmul %{{.*}}, %arg0 {lina.state_use = "product"}
// CHECK-NEXT: %[[U:.*]] = lina.sub %{{.*}}, %[[WS]] {lina.state_use = "epilogue"}
// CHECK: %[[KU:.*]] = lina.matmul %{{.*}}, %[[U]] {lina.state_use = "folded", transpose_lhs}
// CHECK: lina.chunked_backward @gdn_backward {{.*}} schedule <tile_v = 32, warps = 4> placement <state = registers> {
// CHECK: %[[QDO:.*]] = lina.matmul %{{.*}} {lina.state_use = "folded", transpose_lhs} : <16x64>, <16x32> -> <64x32>
// CHECK: lina.matmul %{{.*}}, %arg1 {lina.state_use = "product"} : <16x64>, <64x32> -> <16x32>
// CHECK: %[[D:.*]] = lina.decay_state %arg1
// CHECK: %[[KDV:.*]] = lina.matmul %{{.*}} {lina.state_use = "folded", transpose_lhs} : <16x64>, <16x32> -> <64x32>
// CHECK-NEXT: %[[NEXT:.*]] = lina.sum %[[QDO]], %[[D]], %[[KDV]] : <64x32>
// CHECK: lina.yield %[[NEXT]]

// The printed scans: the state (the gradient) loaded into the accumulators
// once, stored from them before each chunk (bf16, for the gradients
// kernel) and after the last (first), the updates accumulated in place.
// EMIT-LABEL: void lina_backward_states(
// EMIT: reg_state<64, 32> S;
// EMIT-NEXT: S.load(p.initial_state ? p.initial_state + {{.*}} : nullptr, 32);
// EMIT: S.store((bf16 *)p.chunk_states + {{.*}}, 32);
// EMIT: S.product<16, -1>(
// EMIT-NEXT: S.decay<1, true>(
// EMIT: S.update<16>(
// EMIT-NOT: store_state<
// EMIT: S.store(p.final_state + {{.*}}, 32);
// EMIT-LABEL: void lina_backward_state_grads(
// EMIT: reg_state<64, 32> S;
// EMIT-NEXT: S.load(d.dht ? d.dht + {{.*}} : nullptr, 32);
// EMIT: S.store((bf16 *)d.chunk_grads + {{.*}}, 32);
// EMIT: S.product<16>(
// EMIT: S.decay<1, true>(
// EMIT-NEXT: __syncthreads();
// EMIT-NEXT: S.update<16, 1>(
// EMIT-NEXT: S.update<16, 1>(
// EMIT-NOT: sum<
// EMIT: S.store(d.dh0 + {{.*}}, 32);

// 8 value columns do not fill a 16-row accumulator tile: the gradient
// stays in shared memory.
// SHARED-NOT: {{placement|lina.state_use}}
lina.recurrence @gdn <decay = scalar, update = delta, beta = given, qk_l2norm = true, key_dim = 64, value_dim = 32, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true>

// -----

// f32 products run on the CUDA cores, with no accumulators to hold it.
// CHECK-LABEL: lina.chunked @gdn_f32
// CHECK-NOT: placement <state
// CHECK-LABEL: lina.chunked_backward @gdn_f32_backward
// CHECK-NOT: placement
// CHECK-NOT: lina.state_use
// EMIT-LABEL: void lina_backward_states(
// EMIT-NOT: reg_state<
// EMIT: store_state<64, 32>(p.chunk_states + {{.*}}, (smem + 0), 32);
// EMIT-LABEL: void lina_backward_state_grads(
// EMIT-NOT: reg_state<
// EMIT: store_state<64, 32>(d.chunk_grads + {{.*}}, (smem + 0), 32);
lina.recurrence @gdn_f32 <decay = scalar, update = delta, beta = given, qk_l2norm = true, key_dim = 64, value_dim = 32, heads = 1, value_heads = 1, dtype = f32, initial_state = true, final_state = true>
