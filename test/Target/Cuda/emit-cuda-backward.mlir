// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-chunk-backward -lina-fuse-sums -lina-schedule="tile-v=8 strategy=materialize" -lina-pack-states | lina-translate --emit-cuda-backward | FileCheck %s
// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-chunk-backward -lina-fuse-sums -lina-schedule="tile-v=8 strategy=materialize" -lina-pack-states | lina-translate --emit-cuda-backward | FileCheck %s --check-prefix=PRODUCT
// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-schedule=tile-v=8 | not lina-translate --emit-cuda-backward 2>&1 | FileCheck %s --check-prefix=NOBACKWARD

// The backward's kernels. The forward's scan again, writing each chunk's
// starting state to the workspace (in bf16, the spec's dtype), as a device
// function of the CTA's index:
// CHECK: __device__ __forceinline__ void lina_backward_states(lina::Params p, const unsigned block)
// CHECK: const int vt = block % 2;
// CHECK: store_state<16, 8>((bf16 *)p.chunk_states
// Then the reverse scan, a CTA per (sequence, value head, value tile), the
// state's gradient starting from dL/d(final state) and written before each
// chunk; it adds no input's gradient and reads no state:
// CHECK: void lina_backward_state_grads(lina::Params p, lina::GradParams d, const unsigned block)
// CHECK-NOT: p.chunk_states
// CHECK: load_state<16, 8>([[DS:\(smem \+ [0-9]+\)]], d.dht ? d.dht
// CHECK-NEXT: __syncthreads();
// CHECK: for (i64 chunk = chunks - 1; chunk >= 0; --chunk) {
// CHECK: const i64 slot = chunk_slot(begin, seq, chunk, 16);
// CHECK-NEXT: store_state<16, 8>((bf16 *)d.chunk_grads + {{.*}}, [[DS]], 16);
// dL/do, which only tensor-core products read here, stays bf16 as loaded:
// CHECK: load_tile<16, 8, bf16>(((bf16 *)(smem + {{[0-9]+}})), (const bf16 *)d.d_o
// CHECK-NOT: accumulate_
// The chunk's dS0 becomes the carried gradient, summed in its buffer (its
// three terms in one call, no copy), and the first chunk's is dL/dh0:
// CHECK: sum<{{[0-9]+}}, 3>([[DS]],
// CHECK-NOT: copy_tile
// CHECK: if (d.dh0)
// CHECK-NEXT: store_state<16, 8>(d.dh0 + {{.*}}, [[DS]], 16);
// The two scans side by side in one grid, the reverse scan's CTAs first:
// CHECK: extern "C" __global__ void __launch_bounds__(128{{(, 1)?}}) lina_backward_scans(lina::Params p, lina::GradParams d)
// CHECK-NEXT: const unsigned ctas = gridDim.x / 2;
// CHECK-NEXT: if (blockIdx.x < ctas)
// CHECK-NEXT: lina_backward_state_grads(p, d, blockIdx.x);
// CHECK-NEXT: else
// CHECK-NEXT: lina_backward_states(p, blockIdx.x - ctas);
// Then every chunk at once, a grid row a chunk, from its stored state and
// gradient, kept in shared memory as stored (bf16: only tensor-core products
// and row dots read them), their copies landing with the chunk's other loads:
// CHECK: lina_chunk_backward(lina::Params p, lina::GradParams d)
// CHECK: const int vt = blockIdx.x % 2;
// CHECK: for (i64 chunk = blockIdx.y; chunk < chunks; chunk += gridDim.y) {
// CHECK: const i64 slot = chunk_slot(begin, seq, chunk, 16);
// CHECK-NEXT: load_state<16, 8, false>([[S0:\(\(bf16 \*\)\(smem \+ [0-9]+\)\)]], (bf16 *)p.chunk_states
// CHECK-NEXT: load_state<16, 8, false>({{\(\(bf16 \*\)\(smem \+ [0-9]+\)\)}}, (bf16 *)d.chunk_grads
// CHECK: copies_issued();
// CHECK-NEXT: copies_landed<0>();
// CHECK-NEXT: __syncthreads();
// dL/do, one value tile of it:
// CHECK: tile_copy<16, 8, bf16>::fetch({{.*}}d.d_o + (t0 * 1 + hv) * 16 + vt * 8, 16LL, n);
// The UT transform's adjoints are solves with the transposed factor, and
// dO S0^T reads the state tile transposed, with no copy of it:
// PRODUCT: lina_chunk_backward(
// PRODUCT: load_state<16, 8, false>([[S0:\(\(bf16 \*\)\(smem \+ [0-9]+\)\)]], (bf16 *)p.chunk_states
// PRODUCT-NOT: transpose<16, 8>
// PRODUCT: tri_solve_transposed<16, 16>
// PRODUCT: product<16, 16, 8, false, true, true>({{.*}}, [[S0]])
// Gradients of a value tile's share of key-side inputs are added
// atomically; the value tile's own columns of dv likewise:
// CHECK-DAG: accumulate_rows<16, 1>(d.dbeta + (t0 * 1 + hv) * 1, 1LL
// CHECK-DAG: accumulate_rows<16, 1>(d.dg + (t0 * 1 + hv) * 1, 1LL
// CHECK-DAG: accumulate_rows<16, 8>(d.dv + (t0 * 1 + hv) * 16 + vt * 8, 16LL
// CHECK-DAG: accumulate_rows<16, 16>(d.dk + (t0 * 1 + kh) * 16, 16LL
// CHECK-DAG: accumulate_rows<16, 16>(d.dq + (t0 * 1 + kh) * 16, 16LL
// CHECK-NOT: d.dh0
// The gradients are zeroed by their own kernel first.
// CHECK: lina_backward_zero(float *p, lina::i64 n)

// NOBACKWARD: the module must hold one lina.chunked and its lina.chunked_backward
lina.recurrence @gdn <decay = scalar, update = delta, beta = given, qk_l2norm = true, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true>
