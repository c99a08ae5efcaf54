//===- DecayGradEmulationTest.cpp - decay_product_grad, emulated ----------===//
//
// Part of lina. The backward's gradient through a per-channel decay product
// (Backward.cuh's decay_product_grad) on the emulated device, both sides,
// inclusive and strict, with a partial chunk, against float64 sums: each
// element within a fraction of its own terms' magnitude. Most channels'
// gates factor through their midpoint; a few span more than that allows and
// are summed directly. What lies outside the kept triangle and past the
// chunk's rows is NaN, so a read of it shows.
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

constexpr int kRows = 16, kChannels = 64;

const char *kDecayGrad = R"(
template <bool Lhs>
__device__ void decay_grad(const float *dp, const float *other, const float *g,
                           int n, int strict, float *out) {
  using namespace lina;
  constexpr int R = 16, D = 64, LR = ld(R), LD = ld(D);
  __shared__ float sdp[R * LR], so[R * LD], sg[R * LD], sd[R * LD];
  for (int i = threadIdx.x; i < R * R; i += kThreads)
    sdp[i / R * LR + i % R] = dp[i];
  for (int i = threadIdx.x; i < R * D; i += kThreads) {
    so[i / D * LD + i % D] = other[i];
    sg[i / D * LD + i % D] = g[i];
    sd[i / D * LD + i % D] = __int_as_float(0x7fc00000);
  }
  __syncthreads();
  decay_product_grad<R, D, D, Lhs, true>(sd, sdp, so, sg, sg, n, strict != 0,
                                         nullptr);
  __syncthreads();
  for (int i = threadIdx.x; i < R * D; i += kThreads)
    out[i] = sd[i / D * LD + i % D];
}
extern "C" __global__ void decay_grad_lhs(const float *dp, const float *other,
                                          const float *g, int n, int strict,
                                          float *out) {
  decay_grad<true>(dp, other, g, n, strict, out);
}
extern "C" __global__ void decay_grad_rhs(const float *dp, const float *other,
                                          const float *g, int n, int strict,
                                          float *out) {
  decay_grad<false>(dp, other, g, n, strict, out);
}
LINA_KERNEL_ENTRY(decay_grad_lhs)
LINA_KERNEL_ENTRY(decay_grad_rhs)
)";

TEST(DecayGradEmulation, FactoredAndDirectSumsMatchFloat64) {
  const int n = 13;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f), gate(-1.0f, 0.0f);
  // Running sums of log gates: channels 0-7 fall 12 a row (a span of 144
  // over the chunk's 13 rows, past what factors), the rest up to 1 a row.
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
      ASSERT_NO_FATAL_FAILURE(
          load(kDecayGrad, lhs ? "decay_grad_lhs" : "decay_grad_rhs", grad));
      Expected<DeviceBuffer> ddp = upload(dp), dother = upload(other),
                             dg = upload(g),
                             dout = DeviceBuffer::allocate(0, g.size() * 4);
      ASSERT_TRUE(ddp.ok() && dother.ok() && dg.ok() && dout.ok());
      Status launched = grad.kernel.launchWith(
          grad.config, ddp->pointer(), dother->pointer(), dg->pointer(), n,
          strict ? 1 : 0, dout->pointer());
      ASSERT_TRUE(launched.ok()) << launched.message();
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
          ASSERT_NEAR(got[r * kChannels + c], want, 1e-5 * magnitude + 1e-30)
              << "row " << r << ", channel " << c;
        }
    }
}

} // namespace
