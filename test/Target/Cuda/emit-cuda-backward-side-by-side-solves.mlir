// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-chunk-backward -lina-fuse-sums -lina-schedule="tile-v=64 warps=8 strategy=materialize" -lina-place-state -lina-pipeline-loads -lina-pack-states -lina-global-tiles | lina-translate --emit-cuda-backward | FileCheck %s

// Narrow solves between the same two barriers take different threads. With
// no lina-cut-state record the gradients kernel makes everything the
// scans' prepare kernels would have stored: KDA's, at 64 value columns on
// eight warps, solves for U (64 columns) and the value tile's back
// substitution between the same barriers, a thread a column, the second
// from thread 64, so the two run side by side on 128 of the 256 threads.
// A solve alone between its barriers starts at thread 0.
// CHECK-LABEL: lina_chunk_backward(
// CHECK: tri_solve_transposed<16, 128>(
// CHECK: tri_solve<16, 64>(
// CHECK-NEXT: tri_solve_transposed<16, 64, 64>(
lina.recurrence @kda <decay = per_channel, update = delta, beta = given, qk_l2norm = true, key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = bf16, initial_state = true, final_state = true>
