//===- WgmmaGpuTest.cpp - wgmma's shared-memory operand layouts ---------===//
//
// Part of lina. Hopper's warpgroup products (wgmma.mma_async, sm_90a) read
// their operands from shared memory through a 64-bit descriptor: the start
// address, and two byte strides between the 8 x 16-byte "core matrices" a
// tile is cut into, the leading (LBO) and the stride (SBO) byte offset.
// Which of the two is the stride along K and which along M or N, for
// operands stored K-major (16 bytes along K) and MN-major (16 bytes along M
// or N, the transpose flags), is what a code generator needs exactly and
// what the PTX manual's prose leaves easiest to get wrong. This pins it on
// the GPU: one m64n16k16 product per layout against the CPU, with LBO and
// SBO given each way round; only one way matches. Skipped without a Hopper
// GPU (wgmma needs sm_90a). The same test runs on the emulated device
// (wgmma-layouts-emulated), whose reading of a descriptor must agree with
// what the H200 showed.
//
//===----------------------------------------------------------------------===//
#include "GpuFixture.h"

#include "lina/Runtime/Memory.h"
#include "lina/Runtime/Module.h"
#include "lina/Runtime/Nvrtc.h"

#include "gtest/gtest.h"

#include <cstdint>
#include <cstring>
#include <vector>

using namespace lina;
using namespace lina::cuda;

namespace {

// One warpgroup: D (64 x 16, fp32) = A (64 x 16) B (16 x 16), A given
// row-major [m][k], B row-major [k][n]. Each operand is written to shared
// memory cut into core matrices (8 rows of 16 bytes): K-major rows are M or
// N with 8 K elements a row, MN-major rows are K with 8 M or N elements.
// Core matrices adjacent along K are kStride bytes apart, along M or N
// mnStride; the descriptor gets lbo and sbo as given.
constexpr const char *kWgmmaSource = R"CUDA(
typedef unsigned short bf16_bits;
typedef unsigned long long u64;

__device__ unsigned core_offset(int mn, int k, int kMajor, unsigned kStride,
                                unsigned mnStride) {
  unsigned block = (k / 8) * kStride + (mn / 8) * mnStride;
  return block + (kMajor ? (mn % 8) * 16 + (k % 8) * 2
                         : (k % 8) * 16 + (mn % 8) * 2);
}

#ifdef LINA_HOST_EMULATION
__device__ u64 descriptor(const void *tile, unsigned lbo, unsigned sbo) {
  return lina_emu::describe(tile, lbo, sbo, /*layout=*/0);
}
#define LINA_WGMMA(TA, TB)                                                     \
  lina_emu::wgmma(16, c, nullptr, da, db, TA, TB, 0, false)
#define LINA_PROXY_FENCE()
#define LINA_FENCE()
#define LINA_COMMIT() lina_emu::wgmma_commit()
#define LINA_WAIT() lina_emu::wgmma_wait(0)
#else
__device__ u64 descriptor(const void *tile, unsigned lbo, unsigned sbo) {
  unsigned address = (unsigned)__cvta_generic_to_shared(tile);
  return (u64)((address >> 4) & 0x3FFF) | ((u64)((lbo >> 4) & 0x3FFF) << 16) |
         ((u64)((sbo >> 4) & 0x3FFF) << 32);
}
#define LINA_PROXY_FENCE()                                                     \
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory")
#define LINA_FENCE() asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory")
#define LINA_COMMIT()                                                          \
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory")
#define LINA_WAIT()                                                            \
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory")
#define LINA_KERNEL_ENTRY(name)

#define LINA_WGMMA(TA, TB)                                                     \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"                    \
               "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "         \
               "{%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, " #TA       \
               ", " #TB ";\n}\n"                                               \
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]), "+f"(c[4]),   \
                 "+f"(c[5]), "+f"(c[6]), "+f"(c[7])                            \
               : "l"(da), "l"(db), "r"(0))
#endif

extern "C" __global__ void wgmma_m64n16k16(
    const bf16_bits *a, const bf16_bits *b, float *d, int transA, int transB,
    unsigned kStrideA, unsigned mnStrideA, unsigned lboA, unsigned sboA,
    unsigned kStrideB, unsigned mnStrideB, unsigned lboB, unsigned sboB) {
  __shared__ __align__(1024) unsigned char tiles[2][4096];
  for (int i = threadIdx.x; i < 64 * 16; i += blockDim.x) {
    int m = i / 16, k = i % 16;
    *(bf16_bits *)(tiles[0] + core_offset(m, k, !transA, kStrideA,
                                          mnStrideA)) = a[i];
  }
  for (int i = threadIdx.x; i < 16 * 16; i += blockDim.x) {
    int k = i / 16, n = i % 16;
    *(bf16_bits *)(tiles[1] + core_offset(n, k, !transB, kStrideB,
                                          mnStrideB)) = b[i];
  }
  __syncthreads();
  // The stores above are the generic proxy's; wgmma reads through the async
  // proxy.
  LINA_PROXY_FENCE();
  u64 da = descriptor(tiles[0], lboA, sboA), db = descriptor(tiles[1], lboB, sboB);
  float c[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  LINA_FENCE();
  if (!transA && !transB)
    LINA_WGMMA(0, 0);
  else if (!transA)
    LINA_WGMMA(0, 1);
  else if (!transB)
    LINA_WGMMA(1, 0);
  else
    LINA_WGMMA(1, 1);
  LINA_COMMIT();
  LINA_WAIT();
  // Each warp holds 16 rows; per 8 columns a lane holds mma.sync's m16n8
  // accumulator fragment.
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int j = 0; j < 2; ++j)
    for (int h = 0; h < 2; ++h) {
      int row = 16 * warp + lane / 4 + 8 * h, col = 8 * j + 2 * (lane % 4);
      d[row * 16 + col] = c[4 * j + 2 * h];
      d[row * 16 + col + 1] = c[4 * j + 2 * h + 1];
    }
}
LINA_KERNEL_ENTRY(wgmma_m64n16k16)
)CUDA";

uint16_t toBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return static_cast<uint16_t>(bits >> 16); // exact for small integers
}

class WgmmaLayouts : public test::OnGpu {
protected:
  void SetUp() override {
    OnGpu::SetUp();
    if (IsSkipped() || HasFatalFailure())
      return;
    if (device_.computeMajor != 9)
      GTEST_SKIP() << "wgmma needs sm_90a; this is " << device_.arch;
    if (!Nvrtc::get().available())
      GTEST_SKIP() << Nvrtc::get().status().message();
    CompileOptions options;
    options.arch = device_.archSpecific();
    Expected<CompiledKernel> compiled = compileCuda(kWgmmaSource, options);
    ASSERT_TRUE(compiled.ok()) << compiled.message();
    Expected<Module> module = Module::load(0, compiled->cubin);
    ASSERT_TRUE(module.ok()) << module.message();
    module_ = std::make_unique<Module>(std::move(*module));
    Expected<Kernel> kernel = module_->kernel("wgmma_m64n16k16");
    ASSERT_TRUE(kernel.ok()) << kernel.message();
    kernel_ = *kernel;

    for (int i = 0; i < 64 * 16; ++i)
      aBits_[i] = toBf16(a_[i] = float(i * 7 % 11 - 5));
    for (int i = 0; i < 16 * 16; ++i)
      bBits_[i] = toBf16(b_[i] = float(i * 5 % 13 - 6));
    for (int m = 0; m < 64; ++m)
      for (int n = 0; n < 16; ++n) {
        float s = 0;
        for (int k = 0; k < 16; ++k)
          s += a_[m * 16 + k] * b_[k * 16 + n];
        expected_[m * 16 + n] = s;
      }
  }

  /// One operand's layout: transposed (MN-major) or not, the byte strides
  /// between core matrices along K and along M or N, and whether the
  /// descriptor's LBO is the K stride (else the MN stride; SBO the other).
  struct Operand {
    bool trans;
    unsigned kStride, mnStride;
    bool lboAlongK;
    unsigned lbo() const { return lboAlongK ? kStride : mnStride; }
    unsigned sbo() const { return lboAlongK ? mnStride : kStride; }
  };

  /// Whether the product with these layouts matches the CPU's exactly.
  bool matches(const Operand &a, const Operand &b) {
    Expected<DeviceBuffer> aDev = DeviceBuffer::allocate(0, sizeof(aBits_));
    Expected<DeviceBuffer> bDev = DeviceBuffer::allocate(0, sizeof(bBits_));
    Expected<DeviceBuffer> dDev = DeviceBuffer::allocate(0, sizeof(expected_));
    EXPECT_TRUE(aDev.ok() && bDev.ok() && dDev.ok()) << aDev.message();
    if (!aDev.ok() || !bDev.ok() || !dDev.ok())
      return false;
    EXPECT_TRUE(aDev->copyFromHost(aBits_, sizeof(aBits_)).ok());
    EXPECT_TRUE(bDev->copyFromHost(bBits_, sizeof(bBits_)).ok());
    // Poisoned: a product that writes nothing cannot match.
    std::vector<float> d(64 * 16, -12345.f);
    EXPECT_TRUE(dDev->copyFromHost(d.data(), d.size() * 4).ok());
    LaunchConfig config;
    config.block.x = 128;
    Status launched = kernel_.launchWith(
        config, aDev->pointer(), bDev->pointer(), dDev->pointer(),
        int(a.trans), int(b.trans), a.kStride, a.mnStride, a.lbo(), a.sbo(),
        b.kStride, b.mnStride, b.lbo(), b.sbo());
    EXPECT_TRUE(launched.ok()) << launched.message();
    Status synced = synchronizeDevice(0);
    EXPECT_TRUE(synced.ok()) << synced.message();
    EXPECT_TRUE(dDev->copyToHost(d.data(), d.size() * 4).ok());
    return std::memcmp(d.data(), expected_, sizeof(expected_)) == 0;
  }

  std::unique_ptr<Module> module_;
  Kernel kernel_;
  float a_[64 * 16], b_[16 * 16], expected_[64 * 16];
  uint16_t aBits_[64 * 16], bBits_[16 * 16];
};

// Strides that tell the two readings apart: K-major tiles keep a row's two
// K core matrices next to each other (128 bytes apart) and the 8-row groups
// 256 apart; MN-major tiles keep the M or N core matrices next to each
// other and the K halves further apart.
TEST_F(WgmmaLayouts, LeadingAndStrideOffsetsPerMajorness) {
  const Operand kMajorA{false, 128, 256, true}, kMajorB{false, 128, 256, true};
  const Operand mnMajorA{true, 1024, 128, true}, mnMajorB{true, 256, 128, true};
  auto swapped = [](Operand o) {
    o.lboAlongK = !o.lboAlongK;
    return o;
  };
  struct Row {
    const char *name;
    Operand a, b;
  };
  std::vector<Row> rows = {
      {"A K-major, B K-major", kMajorA, kMajorB},
      {"A MN-major, B K-major", mnMajorA, kMajorB},
      {"A K-major, B MN-major", kMajorA, mnMajorB},
      {"A MN-major, B MN-major", mnMajorA, mnMajorB},
  };
  // Measured on an H200: without swizzling, LBO is the
  // stride between core matrices adjacent in K and SBO between those
  // adjacent in M or N, for K-major and MN-major operands alike; the other
  // reading of either descriptor gives a wrong product.
  for (const Row &row : rows) {
    SCOPED_TRACE(row.name);
    EXPECT_TRUE(matches(row.a, row.b));
    EXPECT_FALSE(matches(swapped(row.a), row.b));
    EXPECT_FALSE(matches(row.a, swapped(row.b)));
  }
}

} // namespace
