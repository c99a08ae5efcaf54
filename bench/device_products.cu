//===- device_products.cu - The device library's product, strip by strip -===//
//
// Part of lina. Times Prelude.cuh's tensor-core product alone, a CTA an SM
// repeating it on shared-memory operands, with each warp summing one 16 x 8
// block at a time (product_blocks_into, the library's only loop before
// strips) and strips of two and four blocks (product_strips_into), at the
// tile shapes of the backward's gradients kernel. What it printed chose
// product_into's strip rule (docs/perf-notes.md). Build and run on a GPU
// machine:
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -DLINA_THREADS=256 \
//       -I codegen/lib/Cuda -o device_products bench/device_products.cu
//   ./device_products
//
//===----------------------------------------------------------------------===//
#include <cstdio>
#include <cuda_runtime.h>
#ifndef LINA_THREADS
#define LINA_THREADS 256
#endif
#include "Prelude.cuh"
using namespace lina;

template <int M, int N, int KD, bool TB, int NB, typename EA, typename EB>
__global__ void __launch_bounds__(LINA_THREADS) bench(float *out, int iters) {
  extern __shared__ __align__(16) unsigned char raw[];
  constexpr int AE = M * ld(KD), BE = TB ? N * ld(KD) : KD * ld(N);
  EA *A = (EA *)raw;
  EB *B = (EB *)(raw + ((AE * sizeof(EA) + 15) / 16) * 16);
  float *D = (float *)((unsigned char *)B + ((BE * sizeof(EB) + 15) / 16) * 16);
  for (int i = threadIdx.x; i < AE; i += kThreads)
    from_float(0.01f * ((i * 7 + blockIdx.x) % 13), A[i]);
  for (int i = threadIdx.x; i < BE; i += kThreads)
    from_float(0.01f * ((i * 5 + blockIdx.x) % 11), B[i]);
  __syncthreads();
  float s = 0.0f;
  for (int it = 0; it < iters; ++it) {
    if constexpr (NB == 1)
      product_blocks_into<M, N, KD, false, TB>(tile_rows<N>{D}, A, B,
                                               unchanged());
    else
      product_strips_into<M, N, KD, false, TB, NB>(tile_rows<N>{D}, A, B,
                                                   unchanged());
    __syncthreads();
    s += D[threadIdx.x % (M * ld(N))];
    __syncthreads();
  }
  out[blockIdx.x * kThreads + threadIdx.x] = s;
}

template <int M, int N, int KD, bool TB, int NB, typename EA, typename EB>
void run(const char *name, int ctasPerSm) {
  constexpr int AE = M * ld(KD), BE = TB ? N * ld(KD) : KD * ld(N);
  size_t bytes = ((AE * sizeof(EA) + 15) / 16) * 16 +
                 ((BE * sizeof(EB) + 15) / 16) * 16 + M * ld(N) * 4;
  auto k = bench<M, N, KD, TB, NB, EA, EB>;
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       (int)bytes);
  int grid = 132 * ctasPerSm, iters = 2000;
  float *out;
  cudaMalloc(&out, grid * LINA_THREADS * 4);
  k<<<grid, LINA_THREADS, bytes>>>(out, 10);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaEventRecord(a);
  k<<<grid, LINA_THREADS, bytes>>>(out, iters);
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms;
  cudaEventElapsedTime(&ms, a, b);
  cudaError_t e = cudaGetLastError();
  printf("%-44s threads %d NB %d ctas/SM %d: %.1f ns a product (per CTA) %s\n",
         name, LINA_THREADS, NB, ctasPerSm, ms * 1e6 / iters,
         e == cudaSuccess ? "" : cudaGetErrorString(e));
  cudaFree(out);
}

#define ALL(M, N, KD, TB, EA, EB, tag)                                         \
  run<M, N, KD, TB, 1, EA, EB>(tag, 1);                                        \
  if constexpr ((N / 8) % 2 == 0)                                              \
    run<M, N, KD, TB, 2, EA, EB>(tag, 1);                                      \
  if constexpr ((N / 8) % 4 == 0)                                              \
    run<M, N, KD, TB, 4, EA, EB>(tag, 1);

int main() {
  ALL(32, 128, 128, false, float, mma_t, "32x128x128 A f32, B packed");
  ALL(32, 128, 128, false, float, float, "32x128x128 A f32, B f32");
  ALL(32, 128, 32, false, float, float, "32x128x32 A f32, B f32");
  ALL(32, 32, 128, true, float, float, "32x32x128 A f32, B^T f32");
  ALL(16, 128, 128, false, float, mma_t, "16x128x128 A f32, B packed");
  ALL(16, 128, 16, false, float, mma_t, "16x128x16 A f32, B packed");
  return 0;
}
