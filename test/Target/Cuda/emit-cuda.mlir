// RUN: lina-opt %s -lina-chunk=chunk-size=32 -lina-schedule=tile-v=16 | lina-translate --emit-cuda | FileCheck %s
// RUN: lina-opt %s -lina-chunk=chunk-size=32 -lina-schedule="tile-v=16 strategy=materialize" | lina-translate --emit-cuda | FileCheck %s --check-prefix=MAT
// RUN: lina-opt %s -lina-chunk=chunk-size=32 -lina-schedule="tile-v=16 strategy=split" -lina-cut-state -lina-row-passes | lina-translate --emit-cuda | FileCheck %s --check-prefix=SPLIT
// RUN: not lina-opt %s -lina-chunk -lina-schedule=tile-v=12 2>&1 | FileCheck %s --check-prefix=BADTILE
// RUN: not lina-opt %s -lina-chunk -lina-schedule=strategy=eager 2>&1 | FileCheck %s --check-prefix=BADSTRATEGY
// RUN: lina-opt %s | not lina-translate --emit-cuda 2>&1 | FileCheck %s --check-prefix=UNCHUNKED

// The device library carries the tensor-core instruction once; the kernel is
// a sequence of calls into it, with a barrier only where a call touches what
// an earlier one wrote (the chunk's loads come first and run back to back). Tiles of 16
// value columns are padded to rows of 24 floats.
// CHECK: #define LINA_THREADS 128
// CHECK: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// CHECK: extern "C" __global__ void __launch_bounds__(128) lina_chunk_fused(lina::Params p)
// CHECK: const int vt = blockIdx.x % 4;
// CHECK: const int hv = (blockIdx.x / 4) % 4;
// CHECK: const int kh = hv / 2;
// CHECK: for (i64 t0 = begin; t0 < end; t0 += 32) {
// CHECK: load_tile<32, 32, bf16>
// CHECK-NEXT: load_tile<32, 32, bf16>
// CHECK-NEXT: load_tile<32, 16, bf16>({{.*}}p.v + (t0 * 4 + hv) * 64 + vt * 16, 256LL, n);
// CHECK-NEXT: load_tile<32, 1, float>({{.*}}p.g + t0 * 4 + hv, 4LL, n);
// CHECK-NEXT: load_tile<32, 1, float>({{.*}}p.beta + t0 * 4 + hv, 4LL, n);
// CHECK-NEXT: __syncthreads();
// CHECK: decay_product<32, 32, 1, true>
// CHECK: tri_solve<32, 32>
// CHECK: tri_solve<32, 16>
// CHECK: store_tile<32, 16, bf16>
// The state decays and takes the chunk's update in place, in its own
// buffer, so no copy ends the chunk.
// CHECK: matmul<32, 16, 32, true, true>
// CHECK: decay_state<32, 16, 1, false>((smem + 0), (smem + 0),
// CHECK: add<768>((smem + 0), (smem + 0),
// CHECK-NOT: copy_tile
// CHECK: if (p.final_state)
// CHECK-NOT: lina_chunk_output

// MAT: lina_chunk_scan(lina::Params p)
// MAT: store_state<32, 16>(p.chunk_states +
// MAT-NOT: store_tile
// MAT: add<768>((smem + 0), (smem + 0),
// MAT: lina_chunk_output(lina::Params p)
// MAT: const i64 chunk = blockIdx.y;
// MAT: if (t0 >= end) return;
// MAT: const i64 slot = chunk_slot(begin, seq, chunk, 32);
// MAT: load_state<32, 16>({{.*}}p.chunk_states + {{.*}}(slot) * 4 + hv
// MAT: store_tile<32, 16, bf16>
// MAT-NOT: copy_tile

// The split strategy: a chunk-parallel kernel over all value columns
// computes the state-independent values (the solves for W and U, the q.k
// decay product, the decayed q and k) and stores them, in bf16 where only a
// tensor-core product reads them (W) and in fp32 where the scan subtracts
// (U), the solves straight from registers; and the exponentials of the
// last row of the gate cumsum, the decay factors that are all the scan's
// decay_state reads; the scan loads its value tile of them and sums no
// gates. Its bf16
// tiles stay bf16 in shared memory (packed: only tensor cores read them).
// SPLIT: lina_chunk_prepare(lina::Params p)
// SPLIT: const int vt = blockIdx.x % 1;
// SPLIT: const i64 chunk = blockIdx.y;
// SPLIT-NOT: load_state
// SPLIT: cumsum<32, 1>((smem + [[SUMS:[0-9]+]])
// SPLIT: store_decay_factors<1>((float *)(p.chunk_data + (slot * 4 + hv) * [[REC:[0-9]+]]LL + [[G:[0-9]+]]), ((smem + [[SUMS]]) + (n - 1) * 1));
// SPLIT: tri_solve_to_global<32, 32>((bf16 *)(p.chunk_data + (slot * 4 + hv) * [[REC]]LL
// SPLIT: tri_solve_to_global<32, 64>((float *)(p.chunk_data + (slot * 4 + hv) * [[REC]]LL + [[U:[0-9]+]]), 64LL, {{.*}}, n);
// SPLIT: lina_chunk_split_scan(lina::Params p)
// SPLIT-NOT: tri_solve
// SPLIT-NOT: decay_product
// SPLIT: load_tile<1, 1, float>((smem + [[LAST:[0-9]+]]), (float *)(p.chunk_data + (slot * 4 + hv) * [[REC]]LL + [[G]]), 1LL, 1);
// SPLIT: load_tile<32, 32, bf16>(((bf16 *)(smem
// SPLIT: load_tile<32, 16, float>({{.*}}(float *)(p.chunk_data + (slot * 4 + hv) * [[REC]]LL + [[U]]) + vt * 16, 64LL, n);
// SPLIT-NOT: cumsum
// SPLIT: store_tile<32, 16, bf16>
// SPLIT: decay_state<32, 16, 1, true>((smem + 0), (smem + 0), (smem + [[LAST]]));

// BADTILE: tile-v (12) must be a multiple of 8 dividing value_dim (64)
// BADSTRATEGY: strategy must be fused, materialize or split, got 'eager'
// UNCHUNKED: the module must hold exactly one lina.chunked (run -lina-chunk first)

lina.recurrence @gdn <decay = scalar, update = delta, beta = given, qk_l2norm = true, key_dim = 32, value_dim = 64, heads = 2, value_heads = 4, dtype = bf16, initial_state = true, final_state = true>
