//===- DecayProductEmulationTest.cpp - decay_product's sums, emulated -----===//
//
// Part of lina. The per-channel decay product P_ij = sum_c x_ic y_jc
// exp(gx_ic - gy_jc) as Prelude.cuh's decay_product sums it without scratch
// (channel_decay_product: a warp a row, the lanes over channels, warp sums)
// on the emulated device: inclusive and strict, a partial chunk, 16 and 32
// rows on four warps (so rows pair up over several rounds), a channel count
// that is not a multiple of 32, four and two elements summed side by side
// (16-bit and fp32 specs' forms), against float64 sums within 1e-5 of each
// element's terms' magnitude. Every element is written: the output starts as
// NaN, and what lies outside the kept triangle must come back zero. Inputs
// past the chunk's rows are NaN, so a read of them shows.
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

const char *kDecayProduct = R"(
template <int R, int D, int AtOnce>
__device__ void decay_sums(const float *x, const float *y, const float *g,
                           int n, int strict, float *out) {
  using namespace lina;
  constexpr int LR = ld(R), LD = ld(D);
  __shared__ float sx[R * LD], sy[R * LD], sg[R * LD], sp[R * LR];
  for (int i = threadIdx.x; i < R * D; i += kThreads) {
    sx[i / D * LD + i % D] = x[i];
    sy[i / D * LD + i % D] = y[i];
    sg[i / D * LD + i % D] = g[i];
  }
  for (int i = threadIdx.x; i < R * LR; i += kThreads)
    sp[i] = __int_as_float(0x7fc00000);
  __syncthreads();
  channel_decay_product<R, D, D, AtOnce>(sp, sx, sy, sg, sg, n, strict != 0);
  __syncthreads();
  for (int i = threadIdx.x; i < R * R; i += kThreads)
    out[i] = sp[i / R * LR + i % R];
}
#define DECAY_SUMS(name, R, D, AtOnce)                                         \
  extern "C" __global__ void name(const float *x, const float *y,             \
                                  const float *g, int n, int strict,           \
                                  float *out) {                                \
    decay_sums<R, D, AtOnce>(x, y, g, n, strict, out);                         \
  }                                                                            \
  LINA_KERNEL_ENTRY(name)
DECAY_SUMS(decay_sums_16x64_by4, 16, 64, 4)
DECAY_SUMS(decay_sums_32x64_by4, 32, 64, 4)
DECAY_SUMS(decay_sums_16x40_by4, 16, 40, 4)
DECAY_SUMS(decay_sums_16x64_by2, 16, 64, 2)
DECAY_SUMS(decay_sums_32x64_by2, 32, 64, 2)
DECAY_SUMS(decay_sums_16x40_by2, 16, 40, 2)
)";

struct DecayProductCase {
  int rows, channels, atOnce;
};

class DecayProductEmulation
    : public ::testing::TestWithParam<DecayProductCase> {};

TEST_P(DecayProductEmulation, ChannelSumsMatchFloat64) {
  const int kRows = GetParam().rows, kChannels = GetParam().channels;
  const int n = kRows - 3;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f), gate(-1.0f, 0.0f);
  // Running sums of log gates, up to 1 a row; NaN past the chunk's rows.
  std::vector<float> g(kRows * kChannels, NAN), x(g), y(g);
  for (int c = 0; c < kChannels; ++c) {
    float sum = 0.0f;
    for (int r = 0; r < n; ++r) {
      sum += gate(rng);
      g[r * kChannels + c] = sum;
      x[r * kChannels + c] = uniform(rng);
      y[r * kChannels + c] = uniform(rng);
    }
  }
  Loaded sums;
  std::string kernel = "decay_sums_" + std::to_string(kRows) + "x" +
                       std::to_string(kChannels) + "_by" +
                       std::to_string(GetParam().atOnce);
  ASSERT_NO_FATAL_FAILURE(load(kDecayProduct, kernel.c_str(), sums));
  for (bool strict : {false, true}) {
    SCOPED_TRACE(strict ? "strict" : "inclusive");
    Expected<DeviceBuffer> dx = upload(x), dy = upload(y), dg = upload(g),
                           dout = DeviceBuffer::allocate(0, kRows * kRows *
                                                                sizeof(float));
    ASSERT_TRUE(dx.ok() && dy.ok() && dg.ok() && dout.ok());
    Status launched = sums.kernel.launchWith(sums.config, dx->pointer(),
                                             dy->pointer(), dg->pointer(), n,
                                             strict ? 1 : 0, dout->pointer());
    ASSERT_TRUE(launched.ok()) << launched.message();
    std::vector<float> got = download(*dout, kRows * kRows);
    for (int i = 0; i < kRows; ++i)
      for (int j = 0; j < kRows; ++j) {
        double want = 0.0, magnitude = 0.0;
        if (i < n && (strict ? j < i : j <= i))
          for (int c = 0; c < kChannels; ++c) {
            double term = double(x[i * kChannels + c]) *
                          double(y[j * kChannels + c]) *
                          std::exp(double(g[i * kChannels + c]) -
                                   double(g[j * kChannels + c]));
            want += term;
            magnitude += std::abs(term);
          }
        ASSERT_NEAR(got[i * kRows + j], want, 1e-5 * magnitude + 1e-30)
            << "element (" << i << ", " << j << ")";
      }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, DecayProductEmulation,
    ::testing::Values(DecayProductCase{16, 64, 4}, DecayProductCase{32, 64, 4},
                      DecayProductCase{16, 40, 4}, DecayProductCase{16, 64, 2},
                      DecayProductCase{32, 64, 2}, DecayProductCase{16, 40, 2}),
    [](const ::testing::TestParamInfo<DecayProductCase> &info) {
      return std::to_string(info.param.rows) + "Rows" +
             std::to_string(info.param.channels) + "ChannelsBy" +
             std::to_string(info.param.atOnce);
    });

} // namespace
