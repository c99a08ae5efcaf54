//===- SliceTransitionTest.cpp - Stretches of tokens as affine maps -------===//
//
// Part of lina. A sequence cut into stretches that run apart, each reduced
// to (T, C) from the spec's own recurrence and combined in order, gives the
// whole run's final state and, rerun from the combined starting states, its
// outputs: for every preset, with K != V and grouped heads, in float64.
//
//===----------------------------------------------------------------------===//
#include "TestHelpers.h"

#include "lina/Reference/Reference.h"
#include "lina/Reference/SliceTransition.h"

#include "gmock/gmock.h"

using namespace lina;
using namespace lina::reference;
using namespace lina::reference::testing;

namespace {

class EveryPresetInStretches : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryPresetInStretches, CombineToTheWholeRun) {
  Spec spec = smallPreset(GetParam()); // K 8, V 6, 2 heads, 4 value heads
  std::mt19937_64 rng(7);
  Problem p = randomProblem(spec, /*batch=*/2, /*seqLen=*/45, rng);
  ASSERT_EQ(checkShapes(p), "");
  Result whole = runRecurrent(p);
  ASSERT_TRUE(isFinite(whole));

  const int64_t K = spec.keyDim, V = spec.valueDim, HV = spec.valueHeads;
  const int64_t cuts[] = {0, 16, 17, 31, 45}; // one stretch of one token
  std::vector<double> state = p.initialState;
  std::vector<double> outputs(whole.o.size());
  for (int64_t i = 0; i + 1 < 5; ++i) {
    const int64_t t0 = cuts[i], t1 = cuts[i + 1];
    // Each stretch on its own, from zero: what a device would compute
    // before it knows where its stretch starts.
    Problem alone = sliceOf(p, t0, t1, {});
    std::vector<double> transition = sliceTransition(alone);
    ASSERT_EQ(transition.size(), size_t(2 * HV * K * K));
    std::vector<double> next =
        applySlice(transition, state, sliceContribution(alone), K, V);
    // Rerun from the state it really starts from: its outputs.
    Result rerun = runRecurrent(sliceOf(p, t0, t1, state));
    EXPECT_LE(relativeError(rerun.finalState, next), 1e-12)
        << "stretch [" << t0 << ", " << t1 << ")";
    for (int64_t b = 0; b < 2; ++b)
      std::copy(rerun.o.begin() + b * (t1 - t0) * HV * V,
                rerun.o.begin() + (b + 1) * (t1 - t0) * HV * V,
                outputs.begin() + (b * 45 + t0) * HV * V);
    state = std::move(next);
  }
  EXPECT_LE(relativeError(state, whole.finalState), 1e-12);
  EXPECT_LE(relativeError(outputs, whole.o), 1e-12);
}

INSTANTIATE_TEST_SUITE_P(AllPresets, EveryPresetInStretches,
                         ::testing::ValuesIn(presetNames()));

// Decay-only rules move the state by a diagonal (scalar or per-channel)
// transition; the delta rule's mixes channels. The identity run tells them
// apart without knowing the form.
TEST(SliceTransition, DiagonalExactlyForTheAdditiveRules) {
  std::mt19937_64 rng(3);
  for (auto [name, diagonal] : {std::pair{"gla", true},
                                std::pair{"mamba2", true},
                                std::pair{"gdn", false}}) {
    Spec spec = smallPreset(name);
    Problem p = randomProblem(spec, 1, 9, rng);
    std::vector<double> t = sliceTransition(p);
    const int64_t K = spec.keyDim;
    double offDiagonal = 0;
    for (int64_t h = 0; h < spec.valueHeads; ++h)
      for (int64_t i = 0; i < K; ++i)
        for (int64_t j = 0; j < K; ++j)
          if (i != j)
            offDiagonal = std::max(offDiagonal,
                                   std::abs(t[(h * K + i) * K + j]));
    EXPECT_EQ(offDiagonal == 0.0, diagonal) << name << " " << offDiagonal;
  }
}

// A stretch with no tokens is the identity map.
TEST(SliceTransition, AnEmptyStretchChangesNothing) {
  std::mt19937_64 rng(5);
  Spec spec = smallPreset("kda");
  Problem p = randomProblem(spec, 2, 10, rng);
  Problem none = sliceOf(p, 4, 4, {});
  std::vector<double> t = sliceTransition(none);
  std::vector<double> c = sliceContribution(none);
  EXPECT_EQ(applySlice(t, p.initialState, c, spec.keyDim, spec.valueDim),
            p.initialState);
}

} // namespace
