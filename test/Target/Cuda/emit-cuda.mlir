// RUN: lina-opt %s -lina-chunk=chunk-size=32 -lina-schedule=tile-v=16 | lina-translate --emit-cuda | FileCheck %s
// RUN: lina-opt %s -lina-chunk=chunk-size=32 -lina-schedule="tile-v=16 strategy=materialize" | lina-translate --emit-cuda | FileCheck %s --check-prefix=MAT
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
// CHECK: decay_state<32, 16, 1>((smem + 0), (smem + 0),
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
// MAT: load_state<32, 16>({{.*}}p.chunk_states + {{.*}}chunk_slot(begin, seq, chunk, 32)
// MAT: store_tile<32, 16, bf16>
// MAT-NOT: copy_tile

// BADTILE: tile-v (12) must be a multiple of 8 dividing value_dim (64)
// BADSTRATEGY: strategy must be fused or materialize, got 'eager'
// UNCHUNKED: the module must hold exactly one lina.chunked (run -lina-chunk first)

lina.recurrence @gdn <decay = scalar, update = delta, beta = given, qk_l2norm = true, key_dim = 32, value_dim = 64, heads = 2, value_heads = 4, dtype = bf16, initial_state = true, final_state = true>
