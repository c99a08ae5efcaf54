//===- DecayGradEmulationTest.cpp - decay_product_grad, emulated ----------===//
//
// Part of lina. The backward's gradient through a per-channel decay product
// (Backward.cuh's decay_product_grad) on the emulated device, both sides,
// inclusive and strict, with a partial chunk, at 16 and 32 rows, in the
// 16-bit specs' form (3xTF32 tensor-core products, a warp an 8-channel
// block) and the fp32 specs' (sums), against float64 sums: each element
// within 1e-5 of its own terms' magnitude, which one bf16 or tf32 rounding
// of the operands would miss. The first eight channels' gates span more
// than factors through their midpoint, so their block is summed directly
// (the kernel reports how many blocks were); in fp32 at 32 rows the other
// channels factor, at 16 every channel is summed. What lies outside the
// kept triangle and past the chunk's rows is NaN, so a read of it shows.
//
//===----------------------------------------------------------------------===//
#include "EmulationHelpers.h"

#include "gtest/gtest.h"

#include <cmath>
#include <random>

using namespace lina;
using namespace lina::cuda;
using namespace lina::test;

namespace {

constexpr int kChannels = 64;

const char *kDecayGrad = R"(
template <int R, bool Lhs, bool MMA>
__device__ void decay_grad(const float *dp, const float *other, const float *g,
                           int n, int strict, float *out, int *summed) {
  using namespace lina;
  constexpr int D = 64, LR = ld(R), LD = ld(D);
  __shared__ float sdp[R * LR], so[R * LD], sg[R * LD], sd[R * LD];
  for (int i = threadIdx.x; i < R * R; i += kThreads)
    sdp[i / R * LR + i % R] = dp[i];
  for (int i = threadIdx.x; i < R * D; i += kThreads) {
    so[i / D * LD + i % D] = other[i];
    sg[i / D * LD + i % D] = g[i];
    sd[i / D * LD + i % D] = __int_as_float(0x7fc00000);
  }
  __syncthreads();
  if constexpr (MMA) {
    // The path decay_product_grad takes in 16-bit specs, called directly
    // to see which blocks it summed.
    int blocks = mma_channel_decay_product_grad<R, D, D, Lhs>(
        sd, sdp, so, sg, sg, n, strict != 0);
    if (threadIdx.x % 32 == 0)
      summed[threadIdx.x / 32] = blocks;
  } else {
    decay_product_grad<R, D, D, Lhs, false>(sd, sdp, so, sg, sg, n,
                                            strict != 0, nullptr);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < R * D; i += kThreads)
    out[i] = sd[i / D * LD + i % D];
}
#define DECAY_GRAD(name, R, Lhs, MMA)                                          \
  extern "C" __global__ void name(const float *dp, const float *other,         \
                                  const float *g, int n, int strict,           \
                                  float *out, int *summed) {                   \
    decay_grad<R, Lhs, MMA>(dp, other, g, n, strict, out, summed);            \
  }                                                                            \
  LINA_KERNEL_ENTRY(name)
DECAY_GRAD(decay_grad_lhs16_mma, 16, true, true)
DECAY_GRAD(decay_grad_rhs16_mma, 16, false, true)
DECAY_GRAD(decay_grad_lhs32_mma, 32, true, true)
DECAY_GRAD(decay_grad_rhs32_mma, 32, false, true)
DECAY_GRAD(decay_grad_lhs16_sums, 16, true, false)
DECAY_GRAD(decay_grad_rhs16_sums, 16, false, false)
DECAY_GRAD(decay_grad_lhs32_sums, 32, true, false)
DECAY_GRAD(decay_grad_rhs32_sums, 32, false, false)
)";

struct DecayGradCase {
  int rows;
  bool mma;
};

class DecayGradEmulation : public ::testing::TestWithParam<DecayGradCase> {};

TEST_P(DecayGradEmulation, MatchesFloat64Sums) {
  const int kRows = GetParam().rows, n = kRows - 3;
  const bool mma = GetParam().mma;
  constexpr int kWarps = 4; // EmulationHelpers' 128 threads
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f), gate(-1.0f, 0.0f);
  // Running sums of log gates: channels 0-7 fall 12 a row (a span of 144 or
  // more over the chunk's rows, past what factors), the rest up to 1 a row.
  std::vector<float> g(kRows * kChannels, NAN), other(kRows * kChannels, NAN);
  for (int c = 0; c < kChannels; ++c) {
    float sum = 0.0f;
    for (int r = 0; r < n; ++r) {
      sum += c < 8 ? -12.0f : gate(rng);
      g[r * kChannels + c] = sum;
      other[r * kChannels + c] = uniform(rng);
    }
  }
  for (bool lhs : {true, false})
    for (bool strict : {false, true}) {
      SCOPED_TRACE(std::string(lhs ? "lhs" : "rhs") +
                   (strict ? ", strict" : ", inclusive"));
      // dP outside the kept triangle (j <= i, j < i when strict, i < n) is
      // never read.
      std::vector<float> dp(kRows * kRows, NAN);
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < (strict ? i : i + 1); ++j)
          dp[i * kRows + j] = uniform(rng);
      Loaded grad;
      std::string kernel =
          std::string(lhs ? "decay_grad_lhs" : "decay_grad_rhs") +
          std::to_string(kRows) + (mma ? "_mma" : "_sums");
      ASSERT_NO_FATAL_FAILURE(load(kDecayGrad, kernel.c_str(), grad));
      Expected<DeviceBuffer> ddp = upload(dp), dother = upload(other),
                             dg = upload(g),
                             dout = DeviceBuffer::allocate(0, g.size() * 4);
      Expected<DeviceBuffer> dsummed = upload(std::vector<int>(kWarps, -1));
      ASSERT_TRUE(ddp.ok() && dother.ok() && dg.ok() && dout.ok() &&
                  dsummed.ok());
      Status launched = grad.kernel.launchWith(
          grad.config, ddp->pointer(), dother->pointer(), dg->pointer(), n,
          strict ? 1 : 0, dout->pointer(), dsummed->pointer());
      ASSERT_TRUE(launched.ok()) << launched.message();
      std::vector<float> got = download(*dout, g.size());
      if (mma) {
        // Block 0 (channels 0-7, warp 0's first) summed, the other seven on
        // the tensor cores.
        std::vector<int> summed(kWarps, -1);
        ASSERT_TRUE(
            dsummed->copyToHost(summed.data(), kWarps * sizeof(int)).ok());
        EXPECT_EQ(summed, (std::vector<int>{1, 0, 0, 0}));
      }
      for (int r = 0; r < kRows; ++r)
        for (int c = 0; c < kChannels; ++c) {
          double want = 0.0, magnitude = 0.0;
          for (int k = 0; k < n && r < n; ++k) {
            // lhs: row r's terms j = k; rhs: column r's terms i = k.
            int i = lhs ? r : k, j = lhs ? k : r;
            if (j > i || (strict && j == i))
              continue;
            double term = double(dp[i * kRows + j]) *
                          double(other[k * kChannels + c]) *
                          std::exp(double(g[i * kChannels + c]) -
                                   double(g[j * kChannels + c]));
            want += term;
            magnitude += std::abs(term);
          }
          ASSERT_NEAR(got[r * kChannels + c], want, 1e-5 * magnitude + 1e-30)
              << "row " << r << ", channel " << c;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(
    Forms, DecayGradEmulation,
    ::testing::Values(DecayGradCase{16, true}, DecayGradCase{32, true},
                      DecayGradCase{16, false}, DecayGradCase{32, false}),
    [](const ::testing::TestParamInfo<DecayGradCase> &info) {
      return std::to_string(info.param.rows) +
             (info.param.mma ? "RowsTensorCores" : "RowsSums");
    });

} // namespace
