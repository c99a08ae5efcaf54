//===- TestKernels.h - CUDA sources the runtime tests compile ---*- C++ -*-===//
//
// Part of lina. Kernels written the way lina's emitted code must be: no
// #include at all (NVRTC gets no include path), bf16 as raw 16-bit patterns,
// tensor cores through inline PTX.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TEST_UNIT_RUNTIME_TESTKERNELS_H
#define LINA_TEST_UNIT_RUNTIME_TESTKERNELS_H

namespace lina::test {

/// One warp computes D = A B for A 16x16 (row-major), B 16x8 (row-major, k by
/// n), D 16x8 fp32, with one mma.sync.m16n8k16 bf16 instruction. The register
/// fragments follow the PTX ISA's layout for .m16n8k16 with .bf16: lane =
/// 4 * group + quad; A holds rows group and group+8, columns 2*quad(+1) and
/// 2*quad+8(+1); B holds rows 2*quad(+1) and 2*quad+8(+1) of column group.
inline constexpr const char *kMmaKernelSource = R"CUDA(
typedef unsigned short bf16_bits;

__device__ __forceinline__ unsigned pack_bf16x2(bf16_bits lo, bf16_bits hi) {
  return (unsigned)lo | ((unsigned)hi << 16);
}

extern "C" __global__ void mma_bf16_16x8x16(const bf16_bits *a,
                                            const bf16_bits *b, float *d) {
  unsigned lane = threadIdx.x & 31;
  unsigned group = lane >> 2, quad = lane & 3;
  unsigned col = quad * 2;
  unsigned a0 = pack_bf16x2(a[group * 16 + col], a[group * 16 + col + 1]);
  unsigned a1 = pack_bf16x2(a[(group + 8) * 16 + col],
                            a[(group + 8) * 16 + col + 1]);
  unsigned a2 = pack_bf16x2(a[group * 16 + col + 8], a[group * 16 + col + 9]);
  unsigned a3 = pack_bf16x2(a[(group + 8) * 16 + col + 8],
                            a[(group + 8) * 16 + col + 9]);
  unsigned b0 = pack_bf16x2(b[col * 8 + group], b[(col + 1) * 8 + group]);
  unsigned b1 = pack_bf16x2(b[(col + 8) * 8 + group], b[(col + 9) * 8 + group]);
  float c0 = 0.f, c1 = 0.f, c2 = 0.f, c3 = 0.f;
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  d[group * 8 + col] = c0;
  d[group * 8 + col + 1] = c1;
  d[(group + 8) * 8 + col] = c2;
  d[(group + 8) * 8 + col + 1] = c3;
}
)CUDA";

/// Sums \p n floats through dynamic shared memory, one block; needs
/// n * 4 bytes of it, which makes launches above 48 KiB opt in.
inline constexpr const char *kSharedSumKernelSource = R"CUDA(
extern "C" __global__ void shared_sum(const float *in, int n, float *out) {
  extern __shared__ float staged[];
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    staged[i] = in[i];
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.f;
    for (int i = 0; i < n; ++i)
      total += staged[i];
    *out = total;
  }
}
)CUDA";

} // namespace lina::test

#endif // LINA_TEST_UNIT_RUNTIME_TESTKERNELS_H
