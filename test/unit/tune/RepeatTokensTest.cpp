//===- RepeatTokensTest.cpp - Timing inputs made by repeating tokens -----===//
//
// Part of lina. `lina run --device gpu` and `lina tune` time long sequences
// on a short random problem whose tokens repeat along T (repeatTokens).
// Until this test a fixed per-head gate (RetNet's g, [HV]) was "repeated"
// like a per-token tensor, came out empty, and every RetNet timing failed
// with "'g' is required".
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/TuneTiming.h"
#include "lina/Reference/DeviceCheck.h"
#include "lina/Reference/Problem.h"
#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

#include <random>

using namespace lina;

namespace {

constexpr int64_t kBatch = 2, kSmall = 3, kLong = 7;

reference::HostInputs smallInputs(const Spec &spec) {
  std::mt19937_64 rng(5);
  reference::Problem problem =
      reference::randomProblem(spec, kBatch, kSmall, rng);
  return reference::encodeProblem(problem);
}

TEST(RepeatTokens, FixedPerHeadGatesStayOnePerHead) {
  Spec spec = findPreset("retnet")->spec;
  reference::HostInputs small = smallInputs(spec);
  ASSERT_EQ(small.g.size(), size_t(spec.valueHeads));
  reference::HostInputs r = repeatTokens(spec, small, kBatch, kSmall, kLong);
  EXPECT_EQ(r.g, small.g);
  EXPECT_EQ(r.q.size(), small.q.size() / kSmall * kLong);
}

// Per-token tensors, gates included: token t of sequence b is token
// t % kSmall of the same sequence.
TEST(RepeatTokens, PerTokenTensorsRepeatWithinTheirSequence) {
  Spec spec = findPreset("mamba2")->spec;
  reference::HostInputs small = smallInputs(spec);
  reference::HostInputs r = repeatTokens(spec, small, kBatch, kSmall, kLong);
  size_t heads = size_t(spec.valueHeads);
  ASSERT_EQ(small.g.size(), size_t(kBatch * kSmall) * heads);
  ASSERT_EQ(r.g.size(), size_t(kBatch * kLong) * heads);
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t t = 0; t < kLong; ++t)
      for (size_t h = 0; h < heads; ++h)
        EXPECT_EQ(r.g[(b * kLong + t) * heads + h],
                  small.g[(b * kSmall + t % kSmall) * heads + h]);
}

} // namespace
