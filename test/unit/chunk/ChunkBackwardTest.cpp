//===- ChunkBackwardTest.cpp - The derived backward equals the reference ===//
//
// Part of lina. lina-chunk-backward differentiates the chunked program; the
// CPU executor runs it chunk by chunk in reverse. Its gradients must equal
// the float64 backward reference (itself checked against finite
// differences) for every preset and every kind of field a spec can set.
//
//===----------------------------------------------------------------------===//
#include "lina/Codegen/CpuExecutor.h"
#include "lina/Reference/Backward.h"
#include "lina/Reference/Reference.h"
#include "lina/Spec/Presets.h"
#include "lina/Transforms/Pipeline.h"

#include "RandomSpecs.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <set>
#include <tuple>
#include <utility>

using namespace lina;

namespace {

constexpr double kTolerance = 1e-10;

Spec smallSpec(const std::string &preset, int64_t group, bool initialState) {
  Spec s = findPreset(preset)->spec;
  s.keyDim = 8;
  s.valueDim = 6;
  s.heads = 2;
  s.valueHeads = 2 * group;
  s.initialState = initialState;
  return s;
}

/// The largest relative error of the chunked backward's gradients against
/// runRecurrentBackward's; every gradient is reported on failure.
double worstGradientError(const reference::Problem &problem,
                          const ChunkOptions &base, bool withStateGrad,
                          uint64_t seed) {
  ChunkOptions options = base;
  options.backward = true;
  mlir::MLIRContext ctx;
  std::string error;
  auto module = buildChunkedProgram(ctx, problem.spec, options, error);
  EXPECT_TRUE(module) << error;
  if (!module)
    return INFINITY;
  ChunkedOp forward = *module->getOps<ChunkedOp>().begin();
  ChunkedBackwardOp backward = *module->getOps<ChunkedBackwardOp>().begin();

  std::mt19937_64 rng(seed);
  reference::OutputGradients d =
      reference::randomOutputGradients(problem, withStateGrad, rng);
  const std::vector<double> &dO = d.dO, &dFinal = d.dFinalState;
  reference::Gradients expected =
      reference::runRecurrentBackward(problem, dO, dFinal);
  reference::Gradients actual;
  bool ok = executeChunkedBackward(forward, backward, problem, dO, dFinal,
                                   actual, error);
  EXPECT_TRUE(ok) << error;
  if (!ok)
    return INFINITY;
  double worst = 0;
  for (const reference::GradientError &e :
       reference::compareGradients(actual, expected)) {
    EXPECT_LE(e.error, kTolerance) << e.name;
    worst = std::max(worst, e.error);
  }
  return worst;
}

double worstForRandom(const Spec &spec, int64_t batch, int64_t seqLen,
                      int64_t chunkSize, uint64_t seed,
                      std::vector<int64_t> cuSeqlens = {},
                      bool withStateGrad = true, bool specialize = true) {
  std::mt19937_64 rng(seed);
  reference::Problem problem =
      reference::randomProblem(spec, batch, seqLen, rng, cuSeqlens);
  ChunkOptions options;
  options.chunkSize = chunkSize;
  options.specialize = specialize;
  return worstGradientError(problem, options, withStateGrad, seed + 1);
}

//===----------------------------------------------------------------------===//
// Every preset x chunk size x grouped heads x initial state
//===----------------------------------------------------------------------===//

using MatrixParam = std::tuple<std::string, int64_t, int64_t, bool>;

class BackwardMatrix : public ::testing::TestWithParam<MatrixParam> {};

TEST_P(BackwardMatrix, MatchesTheReference) {
  auto [preset, chunkSize, group, initialState] = GetParam();
  Spec spec = smallSpec(preset, group, initialState);
  // 37 tokens: two full chunks of 16 and a partial one, or one of 32 and a
  // partial one.
  EXPECT_LE(worstForRandom(spec, 2, 37, chunkSize, 3), kTolerance);
}

INSTANTIATE_TEST_SUITE_P(
    AllPresets, BackwardMatrix,
    ::testing::Combine(::testing::Values("linear_attn", "retnet", "mamba2",
                                         "gla", "deltanet", "gdn", "kda",
                                         "rwkv7"),
                       ::testing::Values(16, 32), ::testing::Values(1, 2),
                       ::testing::Bool()),
    [](const auto &info) {
      return std::get<0>(info.param) + "_c" +
             std::to_string(std::get<1>(info.param)) + "_g" +
             std::to_string(std::get<2>(info.param)) +
             (std::get<3>(info.param) ? "_h0" : "");
    });

//===----------------------------------------------------------------------===//
// Fields beyond the presets
//===----------------------------------------------------------------------===//

TEST(BackwardFields, ComputedGatesAndBetas) {
  Spec gdn = smallSpec("gdn", 2, true);
  gdn.gate = GateSource::Softplus;
  gdn.beta = BetaSource::Sigmoid;
  Spec kda = smallSpec("kda", 1, true);
  kda.gate = GateSource::LowerBound;
  kda.gateLowerBound = -5.0;
  kda.beta = BetaSource::TwoSigmoid;
  Spec gla = smallSpec("gla", 1, false);
  gla.gate = GateSource::Softplus;
  gla.scale = 0.3;
  Spec mamba = smallSpec("mamba2", 1, true);
  mamba.gate = GateSource::LowerBound;
  mamba.gateLowerBound = -2.0;
  for (const Spec &spec : {gdn, kda, gla, mamba}) {
    SCOPED_TRACE(std::string(toString(spec.decay)) + " " +
                 toString(spec.gate));
    EXPECT_LE(worstForRandom(spec, 2, 40, 16, 11), kTolerance);
  }
}

TEST(BackwardFields, DeltaRuleVariants) {
  Spec raw = smallSpec("deltanet", 1, true); // keys drawn unit-norm
  raw.qkL2Norm = false;
  Spec fixed = smallSpec("gdn", 1, true); // a RetNet decay on the delta rule
  fixed.decay = DecayKind::FixedPerHead;
  Spec noScale = smallSpec("kda", 2, false);
  noScale.scale = 1.0;
  for (const Spec &spec : {raw, fixed, noScale}) {
    SCOPED_TRACE(toString(spec.decay));
    EXPECT_LE(worstForRandom(spec, 2, 35, 16, 13), kTolerance);
  }
}

TEST(BackwardFields, DplrTiedAndZeroWithAndWithoutSpecialize) {
  Spec tied = smallSpec("rwkv7", 1, true);
  tied.beta = BetaSource::Sigmoid;
  tied.qkL2Norm = true;
  tied.lowRankA = LowRankSource::NegDecayedKey;
  tied.lowRankB = LowRankSource::BetaKey;
  tied.write = WriteWeight::Beta;
  Spec zero = smallSpec("rwkv7", 1, true);
  zero.lowRankA = LowRankSource::Zero;
  for (const Spec &spec : {tied, zero})
    for (bool specialize : {true, false}) {
      SCOPED_TRACE(std::string(toString(spec.lowRankA)) + " specialize " +
                   std::to_string(specialize));
      EXPECT_LE(worstForRandom(spec, 1, 33, 16, 17, {}, true, specialize),
                kTolerance);
    }
}

TEST(BackwardFields, VarlenAndNoFinalStateGradient) {
  for (const char *preset : {"gla", "gdn", "rwkv7"}) {
    SCOPED_TRACE(preset);
    Spec spec = smallSpec(preset, 1, true);
    spec.varlen = true;
    // Sequences of 0, 17, 1 and 30 tokens packed along T.
    EXPECT_LE(worstForRandom(spec, 1, 48, 16, 19, {0, 0, 17, 18, 48}),
              kTolerance);
    Spec plain = smallSpec(preset, 1, false);
    EXPECT_LE(worstForRandom(plain, 2, 20, 16, 23, {}, /*withStateGrad=*/false),
              kTolerance);
  }
}

/// Specs drawn at random from the valid space: every field at a random
/// value, kept when lina::validate accepts the combination. The draws are
/// seeded, so a failure names a reproducible spec.
TEST(BackwardRandomSpecs, MatchTheReference) {
  std::mt19937_64 rng(41);
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  int checked = 0;
  std::set<std::pair<int, int>> forms; // (update, decay) pairs drawn
  for (int attempt = 0; attempt < 4000 && checked < 40; ++attempt) {
    Spec s;
    s.name = "random";
    randomspecs::drawForm(rng, s);
    s.keyDim = 4 + 4 * pick(2);
    s.valueDim = 3 + pick(4);
    s.heads = 1 + pick(2);
    s.valueHeads = s.heads * (1 + pick(2));
    s.dtype = DType::F32;
    s.initialState = pick(2);
    s.finalState = pick(2);
    s.varlen = pick(4) == 0;
    if (!validate(s).empty())
      continue;
    int64_t chunk = pick(2) ? 16 : 32;
    SCOPED_TRACE("spec " + std::to_string(checked) + ": decay " +
                 toString(s.decay) + ", update " + toString(s.update) +
                 ", gate " + toString(s.gate) + ", beta " + toString(s.beta) +
                 ", a " + toString(s.lowRankA) + ", b " + toString(s.lowRankB) +
                 ", chunk " + std::to_string(chunk));
    std::vector<int64_t> cuSeqlens;
    if (s.varlen)
      cuSeqlens = {0, 7, 7, 40};
    EXPECT_LE(worstForRandom(s, s.varlen ? 1 : 2, 40, chunk, 100 + checked,
                             cuSeqlens, s.finalState),
              kTolerance);
    forms.insert({static_cast<int>(s.update), static_cast<int>(s.decay)});
    ++checked;
  }
  EXPECT_EQ(checked, 40) << "too few valid specs drawn";
  // The sample spans the space: every update rule with several decays.
  EXPECT_GE(forms.size(), 10u);
}

/// A backward derived from a wrong forward (the output read from the state
/// after the chunk) must be caught: the comparison can fail.
TEST(BackwardWrongPass, ReadingTheUpdatedStateIsCaught) {
  Spec spec = smallSpec("gdn", 1, true);
  std::mt19937_64 rng(29);
  reference::Problem problem = reference::randomProblem(spec, 1, 40, rng);
  ChunkOptions options;
  options.chunkSize = 16;
  options.testReadUpdatedState = true;
  options.backward = true;
  mlir::MLIRContext ctx;
  std::string error;
  auto module = buildChunkedProgram(ctx, spec, options, error);
  ASSERT_TRUE(module) << error;
  std::vector<double> dO =
      reference::randomOutputGradients(problem, false, rng).dO;
  reference::Gradients actual;
  ASSERT_TRUE(executeChunkedBackward(
      *module->getOps<ChunkedOp>().begin(),
      *module->getOps<ChunkedBackwardOp>().begin(), problem, dO, {}, actual,
      error))
      << error;
  reference::Gradients expected =
      reference::runRecurrentBackward(problem, dO, {});
  double worst = 0;
  for (const reference::GradientError &e :
       reference::compareGradients(actual, expected))
    worst = std::max(worst, e.error);
  EXPECT_GT(worst, 1e-3);
}

} // namespace
