// RUN: lina-opt %s -split-input-file -lina-chunk=chunk-size=16 -lina-chunk-backward -lina-fuse-sums -lina-schedule="tile-v=128 warps=16 strategy=materialize" -lina-cut-state -lina-place-state -lina-pipeline-loads | FileCheck %s
// RUN: lina-opt %s -split-input-file -lina-chunk=chunk-size=16 -lina-chunk-backward -lina-fuse-sums -lina-schedule="tile-v=128 warps=16 strategy=materialize" -lina-cut-state -lina-place-state -lina-pipeline-loads -lina-place-state -lina-pipeline-loads | FileCheck %s
// RUN: lina-opt %s -split-input-file -lina-chunk=chunk-size=16 -lina-chunk-backward -lina-fuse-sums -lina-schedule="tile-v=128 warps=16 strategy=materialize" -lina-cut-state -lina-place-state -lina-pipeline-loads -lina-pack-states -lina-global-tiles | lina-translate --split-input-file --emit-cuda-backward | FileCheck %s --check-prefix=EMIT
// RUN: lina-opt %s -split-input-file -lina-chunk=chunk-size=16 -lina-chunk-backward -lina-fuse-sums -lina-schedule="tile-v=128 warps=16 strategy=materialize" -lina-cut-state -lina-place-state -lina-pack-states -lina-global-tiles | lina-translate --split-input-file --emit-cuda-backward | FileCheck %s --check-prefix=NONE
// RUN: lina-opt %s -split-input-file -lina-chunk=chunk-size=16 -lina-chunk-backward -lina-fuse-sums -lina-schedule="tile-v=128 warps=16 strategy=materialize" -lina-cut-state -lina-place-state -lina-pipeline-loads -lina-pack-states -lina-global-tiles \
// RUN:   | sed 's/schedule <tile_v = 128, warps = 16> {/schedule <tile_v = 128, warps = 16> placement <ring = 2> {/' \
// RUN:   | not lina-translate --split-input-file --emit-cuda-backward 2>&1 | FileCheck %s --check-prefix=REFUSED

// The backward's two scans walk a head's chunks one after another, a CTA
// an SM, and each chunk's loads sat on that chain. They fetch the next
// chunk's tiles while they work on this one, wherever the rings fit in
// shared memory beside the rest: KDA's states scan (the lina.chunked's
// placement is that scan's), whose tiles all come from the record by
// cp.async, copies two chunks ahead into three buffers, its reverse scan
// one chunk ahead into two. Planned twice, the same.
// CHECK-LABEL: lina.chunked @kda
// CHECK-SAME: placement <state = registers, ring = 3> {
// CHECK-LABEL: lina.chunked_backward @kda_backward
// CHECK-SAME: placement <state = registers, ring = 2>
// The states scan fetches the chunk after this one, the reverse scan the
// chunk before, each at the top of the chunk, after the barrier that ends
// every read of the buffers the copies write.
// EMIT-LABEL: void lina_backward_states(
// EMIT: auto fetch_chunk = [&](i64 t0, int into) {
// EMIT: fetch_chunk(begin + 0, 0);
// EMIT: fetch_chunk(begin + 16, [[STATES:[0-9]+]]);
// EMIT: for (i64 t0 = begin; t0 < end; t0 += 16) {
// EMIT: copies_landed<1>();
// EMIT-NEXT: __syncthreads();
// EMIT-NEXT: if (t0 + 32 < end)
// EMIT-NEXT: fetch_chunk(t0 + 32, ring == 0 ? [[LAST:[0-9]+]] : ring - [[STATES]]);
// EMIT-NOT: load_tile<
// EMIT: ring = ring == [[LAST]] ? 0 : ring + [[STATES]];
// EMIT-LABEL: void lina_backward_state_grads(
// EMIT: const i64 chunks = (end - begin + 16 - 1) / 16;
// EMIT: const i64 t0 = begin + (chunks - 1) * 16;
// EMIT: auto fetch_chunk = [&](i64 t0, int into) {
// EMIT: tile_copy<16, 128, bf16>::fetch((bf16 *)(smem + {{[0-9]+}} + into), (const bf16 *)d.d_o + [[DO:cursor[0-9]+]], 2048LL, n);
// EMIT: [[DO]] -= 32768LL;
// EMIT: record -= {{[0-9]+}}LL;
// EMIT: if (chunks - 1 - 0 >= 0)
// EMIT-NEXT: fetch_chunk(begin + (chunks - 1 - 0) * 16, 0);
// EMIT: for (i64 chunk = chunks - 1; chunk >= 0; --chunk) {
// EMIT: copies_landed<0>();
// EMIT-NEXT: __syncthreads();
// EMIT-NEXT: if (chunk - 1 >= 0)
// EMIT-NEXT: fetch_chunk(t0 - 16, ring == 0 ? [[GRADS:[0-9]+]] : ring - [[GRADS]]);
// EMIT-NOT: load_tile<
// EMIT: ring = ring == [[GRADS]] ? 0 : ring + [[GRADS]];
// EMIT-NEXT: }
// Without the pass each chunk loads its tiles when it reaches them:
// NONE-LABEL: void lina_backward_states(
// NONE-NOT: fetch_chunk
// NONE: load_tile<16, 128, bf16>(
// NONE-LABEL: void lina_backward_state_grads(
// NONE-NOT: fetch_chunk
// NONE: load_tile<16, 128, bf16>(
lina.recurrence @kda <decay = per_channel, update = delta, beta = given, qk_l2norm = true, key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = bf16, initial_state = true, final_state = true>

// -----

// In f32 the reverse scan's tiles do not all fit in shared memory
// (lina-global-tiles keeps one in global memory), and cp.async writes shared
// memory alone: that scan loads each chunk's tiles when it reaches them,
// while the states scan still fetches the next chunk through registers.
// CHECK-LABEL: lina.chunked @kda_f32
// CHECK-SAME: placement <ring = 1> {
// CHECK-LABEL: lina.chunked_backward @kda_f32_backward
// CHECK-NOT: placement
// CHECK-SAME: {
// EMIT-LABEL: void lina_backward_state_grads(
// EMIT-NOT: fetch_chunk
// EMIT: load_tile<
// A ring recorded there anyway is refused, not printed into global memory:
// REFUSED: placement <ring = 2>, but the fetched tiles' buffers need {{[0-9]+}} bytes of shared memory, more than the 232448 a CTA can have (run -lina-pipeline-loads to pipeline the loads)
lina.recurrence @kda_f32 <decay = per_channel, update = delta, beta = given, qk_l2norm = true, key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = f32, initial_state = true, final_state = true>
