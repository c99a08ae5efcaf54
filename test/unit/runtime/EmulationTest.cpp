//===- EmulationTest.cpp - The emulated device itself ---------------------===//
//
// Part of lina. The emulated device (Emulation.h) as the suites rely on it:
// the device library's tensor-core product and ldmatrix give the products
// the PTX ISA defines, shuffles and barriers behave as on the GPU, a kernel
// that traps, deadlocks or reads shared memory it never wrote says so, and
// what it cannot run is refused by name. This binary runs emulated from its
// first driver call (LINA_EMULATE_GPU is set before main).
//
//===----------------------------------------------------------------------===//
#include "lina/Runtime/Emulation.h"
#include "DecodeLibrary.h"
#include "EmulationHelpers.h"
#include "Prelude.h"
#include "lina/Runtime/Device.h"
#include "lina/Runtime/Driver.h"
#include "lina/Runtime/Memory.h"
#include "lina/Runtime/Module.h"
#include "lina/Runtime/Nvrtc.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <vector>

using namespace lina;
using namespace lina::cuda;
using namespace lina::test;
using lina::cuda::preludeSource;
using ::testing::HasSubstr;

namespace {

/// Runs `loaded`'s kernel, whose one argument is an int a thread, with
/// each step's threads in `order` ("forward" or "reverse"); what it wrote.
std::vector<int> runInOrder(const Loaded &loaded, const LaunchConfig &config,
                            const char *order) {
  std::vector<int> got(config.block.x);
  Expected<DeviceBuffer> out = DeviceBuffer::allocate(0, got.size() * 4);
  EXPECT_TRUE(out.ok()) << out.message();
  if (!out.ok())
    return got;
  Status run = launchInOrder(loaded.kernel, config, order, out->pointer());
  EXPECT_TRUE(run.ok()) << run.message();
  EXPECT_TRUE(out->copyToHost(got.data(), got.size() * 4).ok());
  return got;
}

TEST(Emulation, ReportsTheGpuItStandsFor) {
  ASSERT_TRUE(emulation::enabled());
  ASSERT_TRUE(Driver::get().available()) << Driver::get().status().message();
  Expected<Device> device = queryDevice(0);
  ASSERT_TRUE(device.ok()) << device.message();
  EXPECT_EQ(device->arch, "sm_90");
  EXPECT_EQ(device->smCount, 132);
  EXPECT_EQ(device->sharedMemoryPerBlockOptin, 227 * 1024);
  EXPECT_THAT(device->name, HasSubstr("emulated"));
}

TEST(Emulation, AnUnknownDeviceIsNamedWithTheChoices) {
  setenv("LINA_EMULATE_GPU", "sm_75", 1);
  Expected<emulation::EmulatedGpu> gpu = emulation::requestedGpu();
  setenv("LINA_EMULATE_GPU", "sm_90", 1);
  ASSERT_FALSE(gpu.ok());
  EXPECT_THAT(gpu.message(), HasSubstr("LINA_EMULATE_GPU=sm_75"));
  EXPECT_THAT(gpu.message(), HasSubstr("sm_90"));
  EXPECT_THAT(gpu.message(), HasSubstr("sm_80"));
}

// The device library's product on the tensor-core path (fp32 tiles packed
// to bf16 pairs, and packed bf16 tiles read by ldmatrix, plain and
// transposed) against the same bf16 values multiplied on the host.
const char *kProducts = R"(
extern "C" __global__ void products(const float *a, const float *b,
                                    float *fromFloats, float *fromPacked,
                                    float *transposed) {
  using namespace lina;
  __shared__ float A[32 * ld(32)], B[32 * ld(16)], D[32 * ld(16)];
  // ldmatrix reads 16-byte rows.
  struct alignas(16) Packed {
    mma_t a[32 * ld(32)], b[32 * ld(16)], bt[16 * ld(32)];
  };
  __shared__ Packed packed;
  mma_t *Ap = packed.a, *Bp = packed.b, *Bt = packed.bt;
  for (int i = threadIdx.x; i < 32 * 32; i += kThreads) {
    A[i / 32 * ld(32) + i % 32] = a[i];
    from_float(a[i], Ap[i / 32 * ld(32) + i % 32]);
  }
  for (int i = threadIdx.x; i < 32 * 16; i += kThreads) {
    B[i / 16 * ld(16) + i % 16] = b[i];
    from_float(b[i], Bp[i / 16 * ld(16) + i % 16]);
    from_float(b[i], Bt[i % 16 * ld(32) + i / 16]);
  }
  __syncthreads();
  product<32, 16, 32, false, false, true>(D, A, B);
  __syncthreads();
  for (int i = threadIdx.x; i < 32 * 16; i += kThreads)
    fromFloats[i] = D[i / 16 * ld(16) + i % 16];
  __syncthreads();
  product<32, 16, 32, false, false, true>(D, Ap, Bp);
  __syncthreads();
  for (int i = threadIdx.x; i < 32 * 16; i += kThreads)
    fromPacked[i] = D[i / 16 * ld(16) + i % 16];
  __syncthreads();
  product<32, 16, 32, false, true, true>(D, Ap, Bt);
  __syncthreads();
  for (int i = threadIdx.x; i < 32 * 16; i += kThreads)
    transposed[i] = D[i / 16 * ld(16) + i % 16];
}
LINA_KERNEL_ENTRY(products)
)";

TEST(Emulation, TensorCoreProductsFollowTheFragmentLayouts) {
  Loaded products;
  ASSERT_NO_FATAL_FAILURE(load(kProducts, "products", products));
  std::mt19937 rng(7);
  std::vector<float> a = uniformValues(32 * 32, rng),
                     b = uniformValues(32 * 16, rng);
  std::vector<double> expected(32 * 16, 0.0);
  for (int m = 0; m < 32; ++m)
    for (int n = 0; n < 16; ++n)
      for (int k = 0; k < 32; ++k)
        expected[m * 16 + n] += asBf16(a[m * 32 + k]) * asBf16(b[k * 16 + n]);
  Expected<DeviceBuffer> da = upload(a), db = upload(b),
                         d1 = DeviceBuffer::allocate(0, 512 * 4),
                         d2 = DeviceBuffer::allocate(0, 512 * 4),
                         d3 = DeviceBuffer::allocate(0, 512 * 4);
  ASSERT_TRUE(da.ok() && db.ok() && d1.ok() && d2.ok() && d3.ok());
  Status launched =
      products.kernel.launchWith(products.config, da->pointer(), db->pointer(),
                                 d1->pointer(), d2->pointer(), d3->pointer());
  ASSERT_TRUE(launched.ok()) << launched.message();
  for (DeviceBuffer *out : {&*d1, &*d2, &*d3}) {
    std::vector<float> got = download(*out, 512);
    for (int i = 0; i < 512; ++i)
      ASSERT_NEAR(got[i], expected[i], 1e-4) << "element " << i;
  }
}

// A warp of the device library's product sums a strip of adjacent 8-column
// blocks, reusing each A fragment: four blocks a strip where that leaves a
// strip for each of the CTA's four warps (16 x 128) or half of them, two
// where four would not (16 x 80), their B fragments read in pairs, from
// fp32 and packed tiles, plain and transposed. Every form against the same bf16
// values multiplied on the host.
const char *kColumnStrips = R"(
extern "C" __global__ void strips(const float *a, const float *b, float *out) {
  using namespace lina;
  constexpr int kB = 128 * ld(32) > 32 * ld(128) ? 128 * ld(32) : 32 * ld(128);
  // ldmatrix reads 16-byte rows.
  struct alignas(16) Tiles {
    mma_t Ap[16 * ld(32)], Bp[kB];
    float A[16 * ld(32)], B[kB], D[16 * ld(128)];
  };
  __shared__ Tiles t;
  for (int i = threadIdx.x; i < 16 * 32; i += kThreads) {
    t.A[i / 32 * ld(32) + i % 32] = a[i];
    from_float(a[i], t.Ap[i / 32 * ld(32) + i % 32]);
  }
  auto result = [&](int form, int N) {
    __syncthreads();
    for (int i = threadIdx.x; i < 16 * N; i += kThreads)
      out[form * 16 * 128 + i / N * 128 + i % N] = t.D[i / N * ld(N) + i % N];
    __syncthreads();
  };
  // B (32 x 128) as stored.
  for (int i = threadIdx.x; i < 32 * 128; i += kThreads) {
    t.B[i / 128 * ld(128) + i % 128] = b[i];
    from_float(b[i], t.Bp[i / 128 * ld(128) + i % 128]);
  }
  __syncthreads();
  product<16, 128, 32, false, false, true>(t.D, t.A, t.B);
  result(0, 128);
  product<16, 128, 32, false, false, true>(t.D, t.Ap, t.Bp);
  result(1, 128);
  // B transposed: stored 128 x 32.
  for (int i = threadIdx.x; i < 32 * 128; i += kThreads) {
    t.B[i % 128 * ld(32) + i / 128] = b[i];
    from_float(b[i], t.Bp[i % 128 * ld(32) + i / 128]);
  }
  __syncthreads();
  product<16, 128, 32, false, true, true>(t.D, t.A, t.B);
  result(2, 128);
  product<16, 128, 32, false, true, true>(t.D, t.Ap, t.Bp);
  result(3, 128);
  // Its first 80 rows are op(B)'s first 80 columns: strips of two.
  product<16, 80, 32, false, true, true>(t.D, t.A, t.B);
  result(4, 80);
  product<16, 80, 32, false, true, true>(t.D, t.Ap, t.Bp);
  result(5, 80);
  // B's first 80 columns as stored, rows of ld(80): strips of two.
  for (int i = threadIdx.x; i < 32 * 80; i += kThreads) {
    t.B[i / 80 * ld(80) + i % 80] = b[i / 80 * 128 + i % 80];
    from_float(b[i / 80 * 128 + i % 80], t.Bp[i / 80 * ld(80) + i % 80]);
  }
  __syncthreads();
  product<16, 80, 32, false, false, true>(t.D, t.A, t.B);
  result(6, 80);
  product<16, 80, 32, false, false, true>(t.D, t.Ap, t.Bp);
  result(7, 80);
}
LINA_KERNEL_ENTRY(strips)
)";

TEST(Emulation, ProductsSumStripsOfColumnBlocks) {
  Loaded strips;
  ASSERT_NO_FATAL_FAILURE(load(kColumnStrips, "strips", strips));
  std::mt19937 rng(11);
  std::vector<float> a = uniformValues(16 * 32, rng),
                     b = uniformValues(32 * 128, rng);
  std::vector<double> expected(16 * 128, 0.0);
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 128; ++n)
      for (int k = 0; k < 32; ++k)
        expected[m * 128 + n] += asBf16(a[m * 32 + k]) * asBf16(b[k * 128 + n]);
  constexpr int kForms = 8;
  std::vector<float> poison(kForms * 16 * 128, std::nanf(""));
  Expected<DeviceBuffer> da = upload(a), db = upload(b), out = upload(poison);
  ASSERT_TRUE(da.ok() && db.ok() && out.ok());
  Status launched = strips.kernel.launchWith(strips.config, da->pointer(),
                                             db->pointer(), out->pointer());
  ASSERT_TRUE(launched.ok()) << launched.message();
  std::vector<float> got = download(*out, poison.size());
  const int columns[kForms] = {128, 128, 128, 128, 80, 80, 80, 80};
  for (int form = 0; form < kForms; ++form)
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < columns[form]; ++n)
        ASSERT_NEAR(got[form * 16 * 128 + m * 128 + n], expected[m * 128 + n],
                    1e-4)
            << "form " << form << ", row " << m << ", column " << n;
}

// The state in registers updated as a backward's reverse scan updates its
// gradient: a product Y^T Z subtracted (Z^T's fragment negated) and a tile
// subtracted, then stored as fp32 and as bf16 (the chunk states' form).
// K 32 x VT 32 on four warps: two row tiles, each warp half the keys.
const char *kStateTerms = R"(
extern "C" __global__ void state_terms(const float *s0, const float *y,
                                       const float *z, const float *t,
                                       float *out, lina::bf16 *packed) {
  using namespace lina;
  __shared__ float Y[16 * ld(32)], Z[16 * ld(32)], T[32 * ld(32)];
  for (int i = threadIdx.x; i < 16 * 32; i += kThreads) {
    Y[i / 32 * ld(32) + i % 32] = y[i];
    Z[i / 32 * ld(32) + i % 32] = z[i];
  }
  for (int i = threadIdx.x; i < 32 * 32; i += kThreads)
    T[i / 32 * ld(32) + i % 32] = t[i];
  __syncthreads();
  reg_state<32, 32> S;
  S.load(s0, 32);
  S.update<16, -1>(Y, Z);
  S.add_tile<-1>(T);
  S.store(out, 32);
  S.store(packed, 32);
}
LINA_KERNEL_ENTRY(state_terms)
)";

TEST(Emulation, StateInRegistersSubtractsProductsAndTiles) {
  Loaded kernel;
  ASSERT_NO_FATAL_FAILURE(load(kStateTerms, "state_terms", kernel));
  std::mt19937 rng(11);
  std::vector<float> s0 = uniformValues(32 * 32, rng),
                     y = uniformValues(16 * 32, rng),
                     z = uniformValues(16 * 32, rng),
                     t = uniformValues(32 * 32, rng);
  // S - Y^T Z - T, the product's operands as the tensor cores read them.
  std::vector<double> expected(32 * 32);
  for (int k = 0; k < 32; ++k)
    for (int v = 0; v < 32; ++v) {
      double product = 0.0;
      for (int r = 0; r < 16; ++r)
        product += asBf16(y[r * 32 + k]) * asBf16(z[r * 32 + v]);
      expected[k * 32 + v] = s0[k * 32 + v] - product - t[k * 32 + v];
    }
  Expected<DeviceBuffer> ds = upload(s0), dy = upload(y), dz = upload(z),
                         dt = upload(t),
                         out = DeviceBuffer::allocate(0, 32 * 32 * 4),
                         packed = DeviceBuffer::allocate(0, 32 * 32 * 2);
  ASSERT_TRUE(ds.ok() && dy.ok() && dz.ok() && dt.ok() && out.ok() &&
              packed.ok());
  Status launched = kernel.kernel.launchWith(
      kernel.config, ds->pointer(), dy->pointer(), dz->pointer(), dt->pointer(),
      out->pointer(), packed->pointer());
  ASSERT_TRUE(launched.ok()) << launched.message();
  std::vector<float> got = download(*out, 32 * 32);
  std::vector<uint16_t> halves(32 * 32, 0xffff);
  ASSERT_TRUE(packed->copyToHost(halves.data(), halves.size() * 2).ok());
  for (int i = 0; i < 32 * 32; ++i) {
    ASSERT_NEAR(got[i], expected[i], 1e-4) << "element " << i;
    EXPECT_EQ(halves[i], reference::floatToBf16(got[i])) << "element " << i;
  }
}

// The triangular solves the backward's kernels run a thread a column,
// each starting at a thread of its own (the second op between the same
// barriers takes the threads after the first's; the first here wraps past
// the CTA's last thread), against float64 substitution on the host: at 32
// rows (the back substitution in registers) and at 64 (through shared
// memory).
const char *kSolves = R"(
#define SOLVES(NAME, R, CC, FIRST, NEXT)                                     \
  extern "C" __global__ void NAME(const float *a, const float *x,          \
                                  float *forward, float *transposed) {     \
    using namespace lina;                                                  \
    __shared__ float A[R * ld(R)], X[R * ld(CC)], F[R * ld(CC)],           \
        T[R * ld(CC)];                                                     \
    for (int i = threadIdx.x; i < R * R; i += kThreads)                    \
      A[i / R * ld(R) + i % R] = a[i];                                     \
    for (int i = threadIdx.x; i < R * CC; i += kThreads)                   \
      X[i / CC * ld(CC) + i % CC] = x[i];                                  \
    __syncthreads();                                                       \
    tri_solve<R, CC, FIRST>(F, A, X);                                      \
    tri_solve_transposed<R, CC, NEXT>(T, A, X);                            \
    __syncthreads();                                                       \
    for (int i = threadIdx.x; i < R * CC; i += kThreads) {                 \
      forward[i] = F[i / CC * ld(CC) + i % CC];                            \
      transposed[i] = T[i / CC * ld(CC) + i % CC];                         \
    }                                                                      \
  }                                                                        \
  LINA_KERNEL_ENTRY(NAME)
// The second solve starts where the first's columns end (mod 128).
SOLVES(solves32, 32, 64, 100, 36)
SOLVES(solves64, 64, 16, 100, 116)
)";

TEST(Emulation, TriangularSolvesOnAnyFirstThread) {
  for (auto [name, R, CC] : {std::tuple{"solves32", 32, 64},
                             std::tuple{"solves64", 64, 16}}) {
    SCOPED_TRACE(name);
    Loaded solves;
    ASSERT_NO_FATAL_FAILURE(load(kSolves, name, solves));
    std::mt19937 rng(11);
    // Entries small enough that 64 rows of substitution stay well scaled.
    std::uniform_real_distribution<float> uniform(-0.2f, 0.2f);
    std::vector<float> a(R * R), x(R * CC);
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < R; ++j) // strictly lower; the rest must be unread
        a[i * R + j] = j < i ? uniform(rng) : NAN;
    for (float &v : x)
      v = 3.0f * uniform(rng);
    std::vector<double> forward(R * CC), transposed(R * CC);
    for (int c = 0; c < CC; ++c) {
      for (int i = 0; i < R; ++i) {
        double v = x[i * CC + c];
        for (int j = 0; j < i; ++j)
          v -= double(a[i * R + j]) * forward[j * CC + c];
        forward[i * CC + c] = v;
      }
      for (int i = R - 1; i >= 0; --i) {
        double v = x[i * CC + c];
        for (int j = i + 1; j < R; ++j)
          v -= double(a[j * R + i]) * transposed[j * CC + c];
        transposed[i * CC + c] = v;
      }
    }
    Expected<DeviceBuffer> da = upload(a), dx = upload(x),
                           df = DeviceBuffer::allocate(0, x.size() * 4),
                           dt = DeviceBuffer::allocate(0, x.size() * 4);
    ASSERT_TRUE(da.ok() && dx.ok() && df.ok() && dt.ok());
    Status launched =
        solves.kernel.launchWith(solves.config, da->pointer(), dx->pointer(),
                                 df->pointer(), dt->pointer());
    ASSERT_TRUE(launched.ok()) << launched.message();
    for (auto [out, expected] :
         {std::pair{&*df, &forward}, std::pair{&*dt, &transposed}}) {
      std::vector<float> got = download(*out, R * CC);
      for (int i = 0; i < R * CC; ++i)
        ASSERT_NEAR(got[i], (*expected)[i],
                    1e-5 * (1.0 + std::abs((*expected)[i])))
            << (out == &*df ? "tri_solve" : "tri_solve_transposed")
            << ", row " << i / CC << ", column " << i % CC;
    }
  }
}

const char *kCollectives = R"(
extern "C" __global__ void collectives(float *sums, float *prefixes,
                                       int *anyOdd) {
  // A warp's sum by xor shuffles, its inclusive prefix by up shuffles,
  // and an OR over the CTA.
  float v = threadIdx.x + 1.0f, s = v, prefix = v;
  for (int o = 16; o > 0; o /= 2)
    s += __shfl_xor_sync(0xffffffffu, s, o);
  for (int o = 1; o < 32; o *= 2) {
    float up = __shfl_up_sync(0xffffffffu, prefix, o);
    if (threadIdx.x % 32 >= o)
      prefix += up;
  }
  sums[threadIdx.x] = s;
  prefixes[threadIdx.x] = prefix;
  anyOdd[threadIdx.x] = __syncthreads_or(threadIdx.x == 77);
}
LINA_KERNEL_ENTRY(collectives)
)";

TEST(Emulation, ShufflesAndBarrierReductions) {
  Loaded collectives;
  ASSERT_NO_FATAL_FAILURE(load(kCollectives, "collectives", collectives));
  Expected<DeviceBuffer> sums = DeviceBuffer::allocate(0, 128 * 4),
                         prefixes = DeviceBuffer::allocate(0, 128 * 4),
                         any = DeviceBuffer::allocate(0, 128 * 4);
  ASSERT_TRUE(sums.ok() && prefixes.ok() && any.ok());
  ASSERT_TRUE(collectives.kernel
                  .launchWith(collectives.config, sums->pointer(),
                              prefixes->pointer(), any->pointer())
                  .ok());
  std::vector<float> s(128), p(128);
  std::vector<int> a(128);
  ASSERT_TRUE(sums->copyToHost(s.data(), 512).ok());
  ASSERT_TRUE(prefixes->copyToHost(p.data(), 512).ok());
  ASSERT_TRUE(any->copyToHost(a.data(), 512).ok());
  for (int t = 0; t < 128; ++t) {
    int first = t / 32 * 32 + 1, lane = t % 32;
    EXPECT_EQ(s[t], 32.0f * first + 31.0f * 32.0f / 2.0f) << t;
    EXPECT_EQ(p[t], float((lane + 1) * first + lane * (lane + 1) / 2)) << t;
    EXPECT_EQ(a[t], 1) << t;
  }
}

const char *kFaults = R"(
extern "C" __global__ void traps(int cta) {
  if (blockIdx.x == cta && threadIdx.x == 5)
    __trap();
  __syncthreads();
}
LINA_KERNEL_ENTRY(traps)
extern "C" __global__ void divergent() {
  if (threadIdx.x < 64)
    __syncthreads();
}
LINA_KERNEL_ENTRY(divergent)
extern "C" __global__ void unwritten(float *out) {
  LINA_DYNAMIC_SHARED(float, smem);
  out[threadIdx.x] = smem[threadIdx.x];
}
LINA_KERNEL_ENTRY(unwritten)
)";

TEST(Emulation, FaultsAreReportedNotHidden) {
  Expected<Module> module = build(kFaults);
  ASSERT_TRUE(module.ok()) << module.message();
  LaunchConfig config;
  config.grid.x = 3;
  config.block.x = 128;

  Expected<Kernel> traps = module->kernel("traps");
  ASSERT_TRUE(traps.ok());
  Status trapped = traps->launchWith(config, 1);
  ASSERT_FALSE(trapped.ok());
  EXPECT_THAT(trapped.message(), HasSubstr("__trap() in CTA (1, 0, 0)"));
  EXPECT_TRUE(traps->launchWith(config, 7).ok()) << "no CTA 7: no trap";

  Expected<Kernel> divergent = module->kernel("divergent");
  ASSERT_TRUE(divergent.ok());
  // Threads that exit no longer hold a barrier back (as on the GPU): half
  // the CTA at a barrier the other half never reaches still finishes.
  EXPECT_TRUE(divergent->launchWith(config).ok());

  Expected<Kernel> unwritten = module->kernel("unwritten");
  ASSERT_TRUE(unwritten.ok());
  config.grid.x = 1;
  config.sharedMemoryBytes = 128 * 4;
  Expected<DeviceBuffer> out = DeviceBuffer::allocate(0, 128 * 4);
  ASSERT_TRUE(out.ok());
  ASSERT_TRUE(unwritten->launchWith(config, out->pointer()).ok());
  std::vector<float> got(128);
  ASSERT_TRUE(out->copyToHost(got.data(), 512).ok());
  for (float v : got)
    EXPECT_TRUE(std::isnan(v)) << "shared memory starts as NaN";

  EXPECT_FALSE(module->kernel("missing").ok());
}

// The decode library's 16-byte state accesses, run as written: aligned
// they copy, misaligned they trap as they fault on the GPU.
const char *kDecodeAccess = R"(
extern "C" __global__ void copy4(const float *from, float *to, int offset) {
  float v[4];
  lina_decode::ld_f32x4(from + offset, v);
  lina_decode::st_f32x4(to, v);
}
LINA_KERNEL_ENTRY(copy4)
)";

TEST(Emulation, DecodeVectorAccessesNeedTheGpusAlignment) {
  Expected<Module> module = build(kDecodeAccess, decodeLibrarySource());
  ASSERT_TRUE(module.ok()) << module.message();
  Expected<Kernel> copy4 = module->kernel("copy4");
  ASSERT_TRUE(copy4.ok()) << copy4.message();
  Expected<DeviceBuffer> from = upload({1, 2, 3, 4, 5, 6, 7, 8}),
                         to = DeviceBuffer::allocate(0, 16);
  ASSERT_TRUE(from.ok() && to.ok());
  LaunchConfig config;
  config.block.x = 1;
  ASSERT_TRUE(
      copy4->launchWith(config, from->pointer(), to->pointer(), 4).ok());
  std::vector<float> got = download(*to, 4);
  EXPECT_EQ(got[0], 5.0f);
  EXPECT_EQ(got[3], 8.0f);
  Status misaligned =
      copy4->launchWith(config, from->pointer(), to->pointer(), 1);
  ASSERT_FALSE(misaligned.ok());
  EXPECT_THAT(misaligned.message(), HasSubstr("__trap()"));
}

const char *kRace = R"(
extern "C" __global__ void racy(int *out) {
  LINA_DYNAMIC_SHARED(int, x);
  x[threadIdx.x] = threadIdx.x;
  // No barrier: the read below races with the neighbour's write.
  out[threadIdx.x] = x[(threadIdx.x + 1) % blockDim.x];
}
LINA_KERNEL_ENTRY(racy)
)";

TEST(Emulation, ThreadOrderReversedExposesARace) {
  Loaded racy;
  ASSERT_NO_FATAL_FAILURE(load(kRace, "racy", racy));
  LaunchConfig config = racy.config;
  config.sharedMemoryBytes = 128 * 4;
  // In thread order thread 0 reads before thread 1 writes (shared memory
  // starts as all ones bits); reversed, after.
  EXPECT_EQ(runInOrder(racy, config, "forward")[0], -1);
  EXPECT_EQ(runInOrder(racy, config, "reverse")[0], 1);
}

const char *kOrAfterExits = R"(
extern "C" __global__ void or_after_exits(int *out) {
  if (threadIdx.x < 64)
    return;
  out[threadIdx.x] = __syncthreads_or(threadIdx.x == 100);
}
LINA_KERNEL_ENTRY(or_after_exits)
)";

TEST(Emulation, ABarrierOpenedByExitingThreadsGivesItsOr) {
  // Reversed, threads 127 to 64 wait at __syncthreads_or before 63 to 0
  // exit: the last exit opens the barrier, which must still give the OR.
  Loaded orAfterExits;
  ASSERT_NO_FATAL_FAILURE(load(kOrAfterExits, "or_after_exits", orAfterExits));
  std::vector<int> got =
      runInOrder(orAfterExits, orAfterExits.config, "reverse");
  for (int t = 64; t < 128; ++t)
    EXPECT_EQ(got[t], 1) << "thread " << t;
}

const char *kDeadlock = R"(
extern "C" __global__ void deadlock() {
  // Half of warp 0 waits for its warp, the rest of the CTA for the CTA:
  // neither barrier can open.
  if (threadIdx.x < 16)
    __syncwarp();
  else
    __syncthreads();
}
LINA_KERNEL_ENTRY(deadlock)
)";

TEST(Emulation, ThreadsWaitingForeverAreADeadlock) {
  Loaded deadlock;
  ASSERT_NO_FATAL_FAILURE(load(kDeadlock, "deadlock", deadlock));
  Status run = deadlock.kernel.launchWith(deadlock.config);
  ASSERT_FALSE(run.ok()) << "no barrier can open";
  EXPECT_THAT(run.message(), HasSubstr("never reach"));
}

TEST(Emulation, SourceItCannotRunIsRefusedByName) {
  Expected<Module> module = build("#ifdef LINA_HOST_EMULATION\n#error "
                                  "\"this source wants a GPU\"\n#endif\n");
  ASSERT_FALSE(module.ok());
  EXPECT_THAT(module.message(), HasSubstr("this source wants a GPU"));
  EXPECT_THAT(module.message(), HasSubstr("emulated device"));
}

TEST(Emulation, AHostCompilerThatIsNotThereIsNamed) {
  const char *kept = std::getenv("LINA_EMULATION_CXX");
  std::string before = kept ? kept : "";
  setenv("LINA_EMULATION_CXX", "/nonexistent/c++", 1);
  Expected<Module> module = build(kCollectives);
  if (kept)
    setenv("LINA_EMULATION_CXX", before.c_str(), 1);
  else
    unsetenv("LINA_EMULATION_CXX");
  ASSERT_FALSE(module.ok());
  EXPECT_THAT(module.message(),
              HasSubstr("the host compiler (/nonexistent/c++)"));
  EXPECT_THAT(module.message(), HasSubstr("emulated device"));
}

TEST(Emulation, AnImageNotBuiltForItIsRefused) {
  Expected<Module> module = Module::load(0, std::string("\x7f"
                                                        "ELF junk",
                                                        8));
  ASSERT_FALSE(module.ok());
  EXPECT_THAT(module.message(), HasSubstr("CUDA_ERROR_INVALID_IMAGE"));
}

} // namespace
