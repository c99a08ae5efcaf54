//===- DecayGradEmulationTest.cpp - decay_product_grad, emulated ----------===//
//
// Part of lina. The backward's gradient through a per-channel decay product
// (Backward.cuh's decay_product_grad) on the emulated device, both sides,
// inclusive and strict, with a partial chunk, at 16 and 32 rows, against
// float64 sums: each element within a fraction of its own terms' magnitude.
// At 32 rows most channels' gates factor through their midpoint and a few
// span more than that allows and are summed directly; at 16 every channel
// is summed directly. Given scratch, the sums run on the tensor cores
// (mma_decay_product_grad) where every channel's gates factor, their
// operands rounded to bf16; where one does not, as without scratch. What
// lies outside the kept triangle and past the chunk's rows is NaN, so a
// read of it shows.
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
template <int R, bool Lhs, bool UseScratch>
__device__ void decay_grad(const float *dp, const float *other, const float *g,
                           int n, int strict, float *out, int *onTensorCores) {
  using namespace lina;
  constexpr int D = 64, LR = ld(R), LD = ld(D);
  __shared__ float sdp[R * LR], so[R * LD], sg[R * LD], sd[R * LD];
  // ldmatrix reads 16-byte rows of the scaled factor.
  struct alignas(16) Scratch {
    float f[mma_decay_grad_scratch(R, D)];
  };
  __shared__ Scratch scratch;
  for (int i = threadIdx.x; i < R * R; i += kThreads)
    sdp[i / R * LR + i % R] = dp[i];
  for (int i = threadIdx.x; i < R * D; i += kThreads) {
    so[i / D * LD + i % D] = other[i];
    sg[i / D * LD + i % D] = g[i];
    sd[i / D * LD + i % D] = __int_as_float(0x7fc00000);
  }
  __syncthreads();
  if (UseScratch) {
    // As channel_decay_product_grad given scratch, saying which sums ran.
    bool mma = mma_decay_product_grad<R, D, D, Lhs>(sd, sdp, so, sg, sg, n,
                                                    strict != 0, scratch.f);
    if (threadIdx.x == 0)
      *onTensorCores = mma;
    if (!mma)
      decay_product_grad<R, D, D, Lhs, true>(sd, sdp, so, sg, sg, n,
                                             strict != 0, nullptr);
  } else {
    decay_product_grad<R, D, D, Lhs, true>(sd, sdp, so, sg, sg, n,
                                           strict != 0, nullptr);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < R * D; i += kThreads)
    out[i] = sd[i / D * LD + i % D];
}
#define DECAY_GRAD(name, R, Lhs, UseScratch)                                   \
  extern "C" __global__ void name(const float *dp, const float *other,         \
                                  const float *g, int n, int strict,           \
                                  float *out, int *onTensorCores) {            \
    decay_grad<R, Lhs, UseScratch>(dp, other, g, n, strict, out,               \
                                   onTensorCores);                             \
  }                                                                            \
  LINA_KERNEL_ENTRY(name)
DECAY_GRAD(decay_grad_lhs16, 16, true, false)
DECAY_GRAD(decay_grad_rhs16, 16, false, false)
DECAY_GRAD(decay_grad_lhs32, 32, true, false)
DECAY_GRAD(decay_grad_rhs32, 32, false, false)
DECAY_GRAD(decay_grad_mma_lhs16, 16, true, true)
DECAY_GRAD(decay_grad_mma_rhs16, 16, false, true)
DECAY_GRAD(decay_grad_mma_lhs32, 32, true, true)
DECAY_GRAD(decay_grad_mma_rhs32, 32, false, true)
)";

/// The kernel's results for each side and mask against float64 sums, each
/// element within `tolerance` of its own terms' magnitude; channels below
/// `wide` fall 12 a row (a span of 144 or more over the chunk's rows, past
/// what factors), the rest up to 1 a row.
void expectSums(int kRows, const char *kernelPrefix, int wide, double tolerance,
                int onTensorCores = -1) {
  const int n = kRows - 3;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f), gate(-1.0f, 0.0f);
  std::vector<float> g(kRows * kChannels, NAN), other(kRows * kChannels, NAN);
  for (int c = 0; c < kChannels; ++c) {
    float sum = 0.0f;
    for (int r = 0; r < n; ++r) {
      sum += c < wide ? -12.0f : gate(rng);
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
      std::string kernel = std::string(kernelPrefix) + (lhs ? "lhs" : "rhs") +
                           std::to_string(kRows);
      ASSERT_NO_FATAL_FAILURE(load(kDecayGrad, kernel.c_str(), grad));
      Expected<DeviceBuffer> ddp = upload(dp), dother = upload(other),
                             dg = upload(g),
                             dout = DeviceBuffer::allocate(0, g.size() * 4),
                             dmma = upload(std::vector<int>{-1});
      ASSERT_TRUE(ddp.ok() && dother.ok() && dg.ok() && dout.ok() && dmma.ok());
      Status launched = grad.kernel.launchWith(
          grad.config, ddp->pointer(), dother->pointer(), dg->pointer(), n,
          strict ? 1 : 0, dout->pointer(), dmma->pointer());
      ASSERT_TRUE(launched.ok()) << launched.message();
      int mma = -1;
      ASSERT_TRUE(dmma->copyToHost(&mma, sizeof mma).ok());
      EXPECT_EQ(mma, onTensorCores);
      std::vector<float> got = download(*dout, g.size());
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
          ASSERT_NEAR(got[r * kChannels + c], want,
                      tolerance * magnitude + 1e-30)
              << "row " << r << ", channel " << c;
        }
    }
}

class DecayGradEmulation : public ::testing::TestWithParam<int> {};

TEST_P(DecayGradEmulation, FactoredAndDirectSumsMatchFloat64) {
  expectSums(GetParam(), "decay_grad_", /*wide=*/8, 1e-5);
}

// On the tensor cores each term's two operands are rounded to bf16 (2^-9
// relative each): within 2^-7 of the terms' magnitude.
TEST_P(DecayGradEmulation, TensorCoreSumsMatchFloat64) {
  expectSums(GetParam(), "decay_grad_mma_", /*wide=*/0, 1.0 / 128,
             /*onTensorCores=*/1);
}

// A channel whose gates span too much to factor sends the whole CTA to the
// fp32 sums, as precise as without scratch.
TEST_P(DecayGradEmulation, TensorCoreSumsFallBackWhereAChannelIsWide) {
  expectSums(GetParam(), "decay_grad_mma_", /*wide=*/1, 1e-5,
             /*onTensorCores=*/0);
}

INSTANTIATE_TEST_SUITE_P(Rows, DecayGradEmulation, ::testing::Values(16, 32));

} // namespace
