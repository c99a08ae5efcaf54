//===- HopperEmulationTest.cpp - Hopper's machinery on the emulated device ===//
//
// Part of lina. The emulated device runs the sm_90a device library's
// warpgroup products (wgmma, operands through descriptors in the 128-byte
// swizzle, K-major and MN-major, A from shared memory or registers; their
// results only after the wait that retires them), TMA box copies through a
// tensor map the emulated driver encodes (zeros past the tensor's end,
// nothing before the mbarrier's wait), bulk copies and mbarriers (arrivals
// and bytes, phase by phase), named barriers between warpgroups, the tf32
// product and stmatrix. Each against the host's arithmetic or the other
// direction's instruction; what can never complete is reported as a
// deadlock.
//
//===----------------------------------------------------------------------===//
#include "EmulationHelpers.h"

#include "lina/Runtime/CudaApi.h"
#include "lina/Runtime/Driver.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <random>

using namespace lina;
using namespace lina::cuda;
using namespace lina::test;
using ::testing::HasSubstr;

namespace {

// D = A B for A 64 x 64 ([m][k]) and B 64 x 128 ([k][n]) in six ways: both
// operands K-major (A as m rows, B as n rows of 64 k), B MN-major (k rows
// of 64 n; two 64-column boxes LBO apart for n128), A MN-major, A from
// registers (mma.m16n8k16's A layout, warp w's rows 16 w ..), and the
// n32, n64 and n128 shapes. Four k-steps, each advancing the descriptors
// as the scans do. out[variant][m][n], n < N.
const char *kProducts = R"(
namespace lina {
__device__ void store_acc(float *out, const float *acc, int n) {
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4,
            tq = threadIdx.x % 4;
  for (int j = 0; j < n / 8; ++j)
    for (int h = 0; h < 2; ++h)
      for (int e = 0; e < 2; ++e)
        out[(16 * warp + g + 8 * h) * 128 + 8 * j + 2 * tq + e] =
            acc[4 * j + 2 * h + e];
}
}
extern "C" __global__ void products(const float *a, const float *b,
                                    float *out) {
  using namespace lina;
  __shared__ __align__(1024) unsigned char aK[8192], aMN[8192], bK[16384],
      bMN[16384];
  for (int i = threadIdx.x; i < 64 * 64; i += 128) {
    const int m = i / 64, k = i % 64;
    bf16 v;
    from_float(a[i], v);
    *(bf16 *)(aK + wg_offset(m, k)) = v;
    *(bf16 *)(aMN + wg_offset(k, m)) = v;
  }
  for (int i = threadIdx.x; i < 64 * 128; i += 128) {
    const int k = i / 128, n = i % 128;
    bf16 v;
    from_float(b[i], v);
    *(bf16 *)(bK + n * 128 + ((((k >> 3) ^ (n & 7)) << 4) | ((k & 7) * 2))) =
        v;
    *(bf16 *)(bMN + (n / 64) * 8192 + wg_offset(k, n % 64)) = v;
  }
  async_proxy_fence();
  __syncthreads();
  const u64 dAK = wg_descriptor(aK, 16, 1024),
            dAMN = wg_descriptor(aMN, 8192, 1024),
            dBK = wg_descriptor(bK, 16, 1024),
            dBMN = wg_descriptor(bMN, 8192, 1024);
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4,
            tq = threadIdx.x % 4;
  float d0[32], d1[32], d2[32], d3[32], d4[16], d5[64];
  wg_fence();
  for (int kk = 0; kk < 4; ++kk) {
    // A's registers for k-step kk.
    unsigned ar[4];
    for (int r = 0; r < 4; ++r) {
      const int m = 16 * warp + g + 8 * (r & 1), k = 16 * kk + 2 * tq + 8 * (r >> 1);
      ar[r] = pack_bf16x2(a[m * 64 + k], a[m * 64 + k + 1]);
    }
    wgmma_m64n64k16_ss<0, 0>(d0, wg_advance(dAK, kk * 32),
                             wg_advance(dBK, kk * 32), kk > 0);
    wgmma_m64n64k16_ss<0, 1>(d1, wg_advance(dAK, kk * 32),
                             wg_advance(dBMN, kk * 2048), kk > 0);
    wgmma_m64n64k16_ss<1, 0>(d2, wg_advance(dAMN, kk * 2048),
                             wg_advance(dBK, kk * 32), kk > 0);
    wgmma_m64n64k16_rs<1>(d3, ar, wg_advance(dBMN, kk * 2048), kk > 0);
    wgmma_m64n32k16_ss<0, 0>(d4, wg_advance(dAK, kk * 32),
                             wg_advance(dBK, kk * 32), kk > 0);
    wgmma_m64n128k16_rs<1>(d5, ar, wg_advance(dBMN, kk * 2048), kk > 0);
  }
  wg_commit();
  wg_wait<0>();
  store_acc(out, d0, 64);
  store_acc(out + 8192, d1, 64);
  store_acc(out + 2 * 8192, d2, 64);
  store_acc(out + 3 * 8192, d3, 64);
  store_acc(out + 4 * 8192, d4, 32);
  store_acc(out + 5 * 8192, d5, 128);
}
LINA_KERNEL_ENTRY(products)
)";

TEST(HopperEmulation, WarpgroupProductsReadTheSwizzledLayouts) {
  Loaded products;
  ASSERT_NO_FATAL_FAILURE(load(kProducts, "products", products, kHopper));
  std::mt19937 rng(11);
  std::vector<float> a = uniformValues(64 * 64, rng),
                     b = uniformValues(64 * 128, rng);
  Expected<DeviceBuffer> da = upload(a), db = upload(b),
                         out = upload(std::vector<float>(6 * 8192, NAN));
  ASSERT_TRUE(da.ok() && db.ok() && out.ok());
  Status launched = products.kernel.launchWith(products.config, da->pointer(),
                                               db->pointer(), out->pointer());
  ASSERT_TRUE(launched.ok()) << launched.message();
  std::vector<float> got = download(*out, 6 * 8192);
  const char *names[] = {"K-major A and B",
                         "MN-major B",
                         "MN-major A",
                         "A from registers",
                         "n32",
                         "n128, A from "
                         "registers"};
  const int widths[] = {64, 64, 64, 64, 32, 128};
  for (int variant = 0; variant < 6; ++variant) {
    SCOPED_TRACE(names[variant]);
    for (int m = 0; m < 64; ++m)
      for (int n = 0; n < widths[variant]; ++n) {
        double expected = 0.0;
        for (int k = 0; k < 64; ++k)
          expected += asBf16(a[m * 64 + k]) * asBf16(b[k * 128 + n]);
        ASSERT_NEAR(got[variant * 8192 + m * 128 + n], expected, 1e-4)
            << "m " << m << ", n " << n;
      }
  }
}

// What a kernel sees where it does not wait for a product: the
// accumulators read between issue and wgmma.wait_group (out[0]), and a
// product whose B tile is zeroed after it was issued and before the wait
// (out[1]; the GPU may read its operands up to the wait). out[2] is the
// first product after its wait, out[3] the value of A B at (0, 0).
const char *kUnwaited = R"(
extern "C" __global__ void unwaited(float *out) {
  using namespace lina;
  __shared__ __align__(1024) unsigned char aK[8192], bK[8192];
  for (int i = threadIdx.x; i < 64 * 64; i += 128) {
    bf16 one, two;
    from_float(1.0f, one);
    from_float(2.0f, two);
    *(bf16 *)(aK + wg_offset(i / 64, i % 64)) = one;
    *(bf16 *)(bK + wg_offset(i / 64, i % 64)) = two;
  }
  async_proxy_fence();
  __syncthreads();
  const u64 a = wg_descriptor(aK, 16, 1024), b = wg_descriptor(bK, 16, 1024);
  float d[32], e[32];
  wg_fence();
  wgmma_m64n64k16_ss<0, 0>(d, a, b, 0);
  wg_commit();
  const float early = d[0];
  wg_wait<0>();
  wgmma_m64n64k16_ss<0, 0>(e, a, b, 0);
  wg_commit();
  __syncthreads();
  for (int i = threadIdx.x; i < 64 * 64; i += 128)
    *(bf16 *)(bK + wg_offset(i / 64, i % 64)) = bf16{0};
  async_proxy_fence();
  __syncthreads();
  wg_wait<0>();
  if (threadIdx.x == 0) {
    out[0] = early;
    out[1] = e[0];
    out[2] = d[0];
    out[3] = 16 * 2.0f;
  }
}
LINA_KERNEL_ENTRY(unwaited)
)";

TEST(HopperEmulation, ProductsAreThereOnlyAfterTheirWait) {
  Loaded unwaited;
  ASSERT_NO_FATAL_FAILURE(load(kUnwaited, "unwaited", unwaited, kHopper));
  Expected<DeviceBuffer> out = upload(std::vector<float>(4, -1.0f));
  ASSERT_TRUE(out.ok());
  Status launched = unwaited.kernel.launchWith(unwaited.config, out->pointer());
  ASSERT_TRUE(launched.ok()) << launched.message();
  std::vector<float> got = download(*out, 4);
  EXPECT_TRUE(std::isnan(got[0])) << "accumulators before the wait";
  EXPECT_EQ(got[1], 0.0f) << "operands written before the wait";
  EXPECT_EQ(got[2], got[3]) << "the product after its wait";
}

// One TMA box (64 columns x 64 tokens of one head) of a [tokens][2][128]
// bf16 tensor, read back through the swizzle's offsets after the mbarrier's
// phase completes (and once before: out[4096]).
const char *kTensorCopy = R"(
extern "C" __global__ void tensor_copy(const __grid_constant__ lina::tensor_map map,
                                       float *out, int column, int head,
                                       int token) {
  using namespace lina;
  __shared__ __align__(1024) unsigned char box[8192];
  __shared__ u64 bar[1];
  if (threadIdx.x == 0) {
    mbar_init(bar, 1);
    mbar_init_fence();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    mbar_expect_bytes(bar, 8192);
    tma_box(box, &map, column, head, token, bar);
    // Before the wait the box is not there.
    out[64 * 64] = to_float(*(const bf16 *)box);
  }
  mbar_wait(bar, 0);
  for (int i = threadIdx.x; i < 64 * 64; i += 128)
    out[i] = to_float(*(const bf16 *)(box + wg_offset(i / 64, i % 64)));
}
LINA_KERNEL_ENTRY(tensor_copy)
)";

/// A tensor map of `tensor` ([tokens][2][128] bf16) as the runtime encodes
/// the wgmma scan's (TensorMaps.cpp), or the driver's error.
CUresult encodeMap(CUtensorMap &map, void *tensor, unsigned long long tokens) {
  const unsigned long long dims[3] = {128, 2, tokens};
  const unsigned long long strides[2] = {128 * 2, 2 * 128 * 2};
  const unsigned box[3] = {64, 1, 64}, elementStrides[3] = {1, 1, 1};
  return Driver::get().cuTensorMapEncodeTiled(
      &map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, tensor, dims, strides, box,
      elementStrides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

TEST(HopperEmulation, TensorCopiesLandSwizzledWithZerosPastTheEnd) {
  ASSERT_TRUE(Driver::get().available()) << Driver::get().status().message();
  Loaded copy;
  ASSERT_NO_FATAL_FAILURE(load(kTensorCopy, "tensor_copy", copy, kHopper));
  constexpr int kTokens = 70;
  std::vector<uint16_t> tensor(kTokens * 2 * 128);
  for (size_t i = 0; i < tensor.size(); ++i)
    tensor[i] = reference::floatToBf16(float(int(i % 251) - 125));
  Expected<DeviceBuffer> dt = upload(tensor),
                         out = upload(std::vector<float>(64 * 64 + 1, 0.0f));
  ASSERT_TRUE(dt.ok() && out.ok());
  CUtensorMap map;
  ASSERT_EQ(encodeMap(map, reinterpret_cast<void *>(dt->pointer()), kTokens),
            CUDA_SUCCESS);
  // A full box, and one whose last 58 tokens are past the tensor's end.
  for (int token : {3, 64}) {
    SCOPED_TRACE(token);
    const int column = 64, head = 1;
    Status launched = copy.kernel.launchWith(copy.config, map, out->pointer(),
                                             column, head, token);
    ASSERT_TRUE(launched.ok()) << launched.message();
    std::vector<float> got = download(*out, 64 * 64 + 1);
    EXPECT_TRUE(std::isnan(got[64 * 64])) << "the box read before the wait";
    for (int r = 0; r < 64; ++r)
      for (int c = 0; c < 64; ++c) {
        const int t = token + r;
        const float expected =
            t < kTokens ? reference::bf16ToFloat(
                              tensor[(size_t(t) * 2 + head) * 128 + column + c])
                        : 0.0f;
        ASSERT_EQ(got[r * 64 + c], expected) << "row " << r << ", col " << c;
      }
  }
}

TEST(HopperEmulation, TensorMapsRefuseWhatTheDriverRefuses) {
  ASSERT_TRUE(Driver::get().available()) << Driver::get().status().message();
  Expected<DeviceBuffer> dt = DeviceBuffer::allocate(0, 70 * 2 * 128 * 2);
  ASSERT_TRUE(dt.ok());
  CUtensorMap map;
  // TMA's global address must be 16-byte aligned.
  EXPECT_EQ(encodeMap(map, reinterpret_cast<char *>(dt->pointer()) + 2, 70),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(encodeMap(map, reinterpret_cast<void *>(dt->pointer()), 0),
            CUDA_ERROR_INVALID_VALUE);
}

// Two phases of an mbarrier, each a bulk copy of 128 bytes it expects
// (plus `owed` bytes that never come when owed > 0). Without the barrier at
// the end of a phase, thread 0 could complete both phases before another
// thread waits for the first, which then waits forever (on the GPU too).
const char *kBulkCopies = R"(
extern "C" __global__ void bulk_copies(const float *src, float *out,
                                       int owed) {
  using namespace lina;
  __shared__ __align__(16) float buf[2][32];
  __shared__ u64 bar[1];
  if (threadIdx.x == 0) {
    mbar_init(bar, 1);
    mbar_init_fence();
  }
  __syncthreads();
  for (int phase = 0; phase < 2; ++phase) {
    if (threadIdx.x == 0) {
      mbar_expect_bytes(bar, 128 + owed);
      bulk_copy(buf[phase], src + 32 * phase, 128, bar);
    }
    mbar_wait(bar, phase);
    if (threadIdx.x < 32)
      out[32 * phase + threadIdx.x] = buf[phase][threadIdx.x];
    // Parity names a phase among two: no thread may start the next phase
    // before every thread has seen this one complete.
    __syncthreads();
  }
}
LINA_KERNEL_ENTRY(bulk_copies)
)";

TEST(HopperEmulation, MbarrierPhasesWaitForTheirArrivalsAndBytes) {
  Loaded bulk;
  ASSERT_NO_FATAL_FAILURE(load(kBulkCopies, "bulk_copies", bulk, kHopper));
  std::vector<float> src(64);
  for (int i = 0; i < 64; ++i)
    src[i] = float(i) * 0.5f - 3.0f;
  Expected<DeviceBuffer> ds = upload(src),
                         out = upload(std::vector<float>(64, NAN));
  ASSERT_TRUE(ds.ok() && out.ok());
  for (const char *order : {"forward", "reverse"}) {
    SCOPED_TRACE(order);
    Status launched = launchInOrder(bulk.kernel, bulk.config, order,
                                    ds->pointer(), out->pointer(), 0);
    ASSERT_TRUE(launched.ok()) << launched.message();
    EXPECT_EQ(download(*out, 64), src);
  }
  // Bytes that never arrive: the phase never completes.
  Status stuck =
      bulk.kernel.launchWith(bulk.config, ds->pointer(), out->pointer(), 16);
  ASSERT_FALSE(stuck.ok());
  EXPECT_THAT(stuck.message(), HasSubstr("never reach"));
}

// Warpgroup 1 writes, then signals named barrier 1 without waiting;
// warpgroup 0 waits at it, then reads. With `stall`, warpgroup 0 also waits
// at barrier 2, which only it reaches.
const char *kNamedBarriers = R"(
extern "C" __global__ void named_barriers(int *out, int stall) {
  using namespace lina;
  __shared__ int shared[128];
  if (threadIdx.x >= 128) {
    shared[threadIdx.x - 128] = int(threadIdx.x);
    cta_arrive_at<1, 256>();
  } else {
    cta_sync_at<1, 256>();
    out[threadIdx.x] = shared[127 - threadIdx.x];
    if (stall)
      cta_sync_at<2, 256>();
  }
}
LINA_KERNEL_ENTRY(named_barriers)
)";

TEST(HopperEmulation, NamedBarriersOrderWarpgroups) {
  Loaded named;
  ASSERT_NO_FATAL_FAILURE(
      load(kNamedBarriers, "named_barriers", named, kHopper));
  LaunchConfig config;
  config.block.x = 256;
  Expected<DeviceBuffer> out = upload(std::vector<int>(128, -1));
  ASSERT_TRUE(out.ok());
  std::vector<int> expected(128);
  for (int i = 0; i < 128; ++i)
    expected[i] = 255 - i;
  for (const char *order : {"forward", "reverse"}) {
    SCOPED_TRACE(order);
    Status launched =
        launchInOrder(named.kernel, config, order, out->pointer(), 0);
    ASSERT_TRUE(launched.ok()) << launched.message();
    std::vector<int> got(128);
    ASSERT_TRUE(out->copyToHost(got.data(), got.size() * 4).ok());
    EXPECT_EQ(got, expected);
  }
  Status stuck = named.kernel.launchWith(config, out->pointer(), 1);
  ASSERT_FALSE(stuck.ok());
  EXPECT_THAT(stuck.message(), HasSubstr("never reach"));
}

// The delta scan's tf32 product of two 16 x 16 fp32 tiles (one warp).
const char *kTf32 = R"(
extern "C" __global__ void tf32_product(const float *x, const float *y,
                                        float *out) {
  using namespace lina;
  __shared__ float X[16 * 16], Y[16 * 16], D[16 * 16];
  for (int i = threadIdx.x; i < 256; i += 128) {
    X[i] = x[i];
    Y[i] = y[i];
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    float acc[2][4] = {};
    tile16_product(acc, X, 16, Y, 16);
    tile16_store(D, 16, acc, 1.0f);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < 256; i += 128)
    out[i] = D[i];
}
LINA_KERNEL_ENTRY(tf32_product)
)";

float tf32(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  u &= 0xffffe000u;
  std::memcpy(&v, &u, 4);
  return v;
}

TEST(HopperEmulation, Tf32ProductsReadTheTopNineteenBits) {
  Loaded product;
  ASSERT_NO_FATAL_FAILURE(load(kTf32, "tf32_product", product, kHopper));
  std::mt19937 rng(5);
  std::vector<float> x = uniformValues(256, rng), y = uniformValues(256, rng);
  Expected<DeviceBuffer> dx = upload(x), dy = upload(y),
                         out = upload(std::vector<float>(256, NAN));
  ASSERT_TRUE(dx.ok() && dy.ok() && out.ok());
  Status launched = product.kernel.launchWith(product.config, dx->pointer(),
                                              dy->pointer(), out->pointer());
  ASSERT_TRUE(launched.ok()) << launched.message();
  std::vector<float> got = download(*out, 256);
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n) {
      double expected = 0.0, full = 0.0;
      for (int k = 0; k < 16; ++k) {
        expected += double(tf32(x[m * 16 + k])) * tf32(y[k * 16 + n]);
        full += double(x[m * 16 + k]) * y[k * 16 + n];
      }
      ASSERT_NEAR(got[m * 16 + n], expected, 1e-5) << m << ", " << n;
      // The truncation shows: tf32's 10-bit mantissa is not fp32's.
      if (m == 0 && n == 0)
        EXPECT_GT(std::abs(expected - full), 1e-6);
    }
}

// Four 8 x 8 bf16 matrices through ldmatrix and back through stmatrix:
// the same transposition both ways gives the matrices back, one of them
// gives their transposes.
const char *kMatrices = R"(
extern "C" __global__ void matrices(const unsigned short *in,
                                    unsigned short *same,
                                    unsigned short *transposed) {
  using namespace lina;
  __shared__ __align__(16) unsigned short src[256], dst[2][256];
  for (int i = threadIdx.x; i < 256; i += 128)
    src[i] = in[i];
  __syncthreads();
  if (threadIdx.x < 32) {
    const int l = threadIdx.x, row = (l / 8) * 64 + (l % 8) * 8;
    unsigned r[4];
    lina_emu::ldmatrix(r, 4, src + row, true);
    lina_emu::stmatrix(dst[0] + row, r, 4, true);
    lina_emu::ldmatrix(r, 4, src + row, false);
    lina_emu::stmatrix(dst[1] + row, r, 4, true);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < 256; i += 128) {
    same[i] = dst[0][i];
    transposed[i] = dst[1][i];
  }
}
LINA_KERNEL_ENTRY(matrices)
)";

TEST(HopperEmulation, StmatrixInvertsLdmatrix) {
  Loaded matrices;
  ASSERT_NO_FATAL_FAILURE(load(kMatrices, "matrices", matrices, kHopper));
  std::vector<uint16_t> in(256);
  for (int i = 0; i < 256; ++i)
    in[i] = uint16_t(i * 37 + 5);
  Expected<DeviceBuffer> din = upload(in),
                         same = upload(std::vector<uint16_t>(256, 0xffff)),
                         transposed =
                             upload(std::vector<uint16_t>(256, 0xffff));
  ASSERT_TRUE(din.ok() && same.ok() && transposed.ok());
  Status launched = matrices.kernel.launchWith(
      matrices.config, din->pointer(), same->pointer(), transposed->pointer());
  ASSERT_TRUE(launched.ok()) << launched.message();
  std::vector<uint16_t> gotSame(256), gotTransposed(256);
  ASSERT_TRUE(same->copyToHost(gotSame.data(), 512).ok());
  ASSERT_TRUE(transposed->copyToHost(gotTransposed.data(), 512).ok());
  EXPECT_EQ(gotSame, in);
  for (int m = 0; m < 4; ++m)
    for (int r = 0; r < 8; ++r)
      for (int c = 0; c < 8; ++c)
        ASSERT_EQ(gotTransposed[m * 64 + r * 8 + c], in[m * 64 + c * 8 + r])
            << "matrix " << m << " (" << r << ", " << c << ")";
}

} // namespace
