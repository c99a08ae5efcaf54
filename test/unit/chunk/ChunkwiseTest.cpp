//===- ChunkwiseTest.cpp - The chunked program equals the recurrence ---===//
//
// Part of lina. The claim the compiler rests on: the chunkwise program that
// lina-specialize + lina-chunk produce computes exactly the recurrence of the
// spec. Checked in float64 against the reference on fresh random inputs.
//
//===----------------------------------------------------------------------===//
#include "lina/Codegen/CpuExecutor.h"
#include "lina/Reference/Reference.h"
#include "lina/Spec/Presets.h"
#include "lina/Transforms/Pipeline.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

using namespace lina;

namespace {

constexpr double kTolerance = 1e-10;

/// A preset shrunk to test sizes: grouped value heads when `group` > 1.
Spec smallSpec(const Spec &base, int64_t group, bool initialState) {
  Spec s = base;
  s.keyDim = 16;
  s.valueDim = 12;
  s.heads = 2;
  s.valueHeads = 2 * group;
  s.initialState = initialState;
  return s;
}

struct Outcome {
  double outputError, stateError;
};

/// Runs the chunked program and the reference on `problem`.
Outcome compare(const reference::Problem &problem, const ChunkOptions &opts) {
  mlir::MLIRContext ctx;
  std::string error;
  auto module = buildChunkedProgram(ctx, problem.spec, opts, error);
  EXPECT_TRUE(module) << error;
  if (!module)
    return {INFINITY, INFINITY};
  ChunkedOp program = *module->getOps<ChunkedOp>().begin();
  reference::Result expected = reference::runRecurrent(problem);
  reference::Result actual;
  // Poison: every output element must be written by the executor.
  actual.o.assign(expected.o.size(), NAN);
  bool ok = executeChunked(program, problem, actual, error);
  EXPECT_TRUE(ok) << error;
  if (!ok)
    return {INFINITY, INFINITY};
  return {reference::relativeError(actual.o, expected.o),
          reference::relativeError(actual.finalState, expected.finalState)};
}

Outcome compareRandom(const Spec &spec, int64_t batch, int64_t seqLen,
                      int64_t chunkSize, uint64_t seed,
                      std::vector<int64_t> cuSeqlens = {}) {
  std::mt19937_64 rng(seed);
  reference::Problem problem =
      reference::randomProblem(spec, batch, seqLen, rng, cuSeqlens);
  ChunkOptions opts;
  opts.chunkSize = chunkSize;
  return compare(problem, opts);
}

//===----------------------------------------------------------------------===//
// Every preset x chunk size x T x initial state x grouped heads
//===----------------------------------------------------------------------===//

using MatrixParam = std::tuple<std::string, int64_t, int64_t, bool, int64_t>;

class PresetMatrix : public ::testing::TestWithParam<MatrixParam> {};

TEST_P(PresetMatrix, MatchesReference) {
  auto [name, chunkSize, seqLen, initialState, group] = GetParam();
  Spec spec = smallSpec(findPreset(name)->spec, group, initialState);
  Outcome r = compareRandom(spec, /*batch=*/2, seqLen, chunkSize,
                            /*seed=*/chunkSize * 1000 + seqLen);
  EXPECT_LE(r.outputError, kTolerance);
  EXPECT_LE(r.stateError, kTolerance);
}

INSTANTIATE_TEST_SUITE_P(
    AllPresets, PresetMatrix,
    ::testing::Combine(::testing::ValuesIn(presetNames()),
                       ::testing::Values(16, 32, 64, 128),
                       ::testing::Values(1, 7, 64, 100, 333),
                       ::testing::Bool(), ::testing::Values(1, 2)),
    [](const ::testing::TestParamInfo<MatrixParam> &info) {
      return std::get<0>(info.param) + "_C" +
             std::to_string(std::get<1>(info.param)) + "_T" +
             std::to_string(std::get<2>(info.param)) +
             (std::get<3>(info.param) ? "_init" : "_zero") + "_g" +
             std::to_string(std::get<4>(info.param));
    });

//===----------------------------------------------------------------------===//
// Variable-length batches
//===----------------------------------------------------------------------===//

class Varlen : public ::testing::TestWithParam<std::string> {};

TEST_P(Varlen, PackedSequencesMatchReference) {
  Spec spec = smallSpec(findPreset(GetParam())->spec, 2, true);
  spec.varlen = true;
  // Lengths straddle chunk boundaries and include an empty sequence.
  std::vector<int64_t> cu = {0, 5, 5, 38, 105, 106};
  for (int64_t chunkSize : {16, 64}) {
    Outcome r = compareRandom(spec, 1, cu.back(), chunkSize, 7, cu);
    EXPECT_LE(r.outputError, kTolerance) << "C = " << chunkSize;
    EXPECT_LE(r.stateError, kTolerance) << "C = " << chunkSize;
  }
}

INSTANTIATE_TEST_SUITE_P(AllPresets, Varlen,
                         ::testing::ValuesIn(presetNames()));

//===----------------------------------------------------------------------===//
// In-kernel gates and beta, and the specialisable dplr forms
//===----------------------------------------------------------------------===//

TEST(ChunkwiseOptions, ComputedGateAndBeta) {
  Spec gdn = smallSpec(findPreset("gdn")->spec, 2, true);
  gdn.gate = GateSource::Softplus;
  gdn.beta = BetaSource::Sigmoid;
  Spec kda = smallSpec(findPreset("kda")->spec, 1, true);
  kda.gate = GateSource::LowerBound;
  kda.gateLowerBound = -5.0;
  kda.beta = BetaSource::TwoSigmoid;
  Spec gla = smallSpec(findPreset("gla")->spec, 1, false);
  gla.gate = GateSource::Softplus;
  gla.scale = 0.3;
  for (const Spec &spec : {gdn, kda, gla}) {
    Outcome r = compareRandom(spec, 2, 77, 32, 11);
    EXPECT_LE(r.outputError, kTolerance) << toString(spec.gate);
    EXPECT_LE(r.stateError, kTolerance) << toString(spec.gate);
  }
}

/// A dplr spec with tied vectors, specialised or not, equals the reference.
TEST(ChunkwiseOptions, TiedDplrWithAndWithoutSpecialize) {
  Spec tied = smallSpec(findPreset("rwkv7")->spec, 1, true);
  tied.beta = BetaSource::Sigmoid;
  tied.qkL2Norm = true; // keeps I - beta k k^T a contraction
  tied.lowRankA = LowRankSource::NegDecayedKey;
  tied.lowRankB = LowRankSource::BetaKey;
  Spec unitWrite = tied;
  tied.write = WriteWeight::Beta;
  Spec zero = smallSpec(findPreset("rwkv7")->spec, 1, true);
  zero.lowRankA = LowRankSource::Zero;
  Spec zeroBetaWrite = zero;
  zeroBetaWrite.beta = BetaSource::Sigmoid;
  zeroBetaWrite.write = WriteWeight::Beta;
  for (const Spec &spec : {tied, unitWrite, zero, zeroBetaWrite})
    for (bool specialize : {true, false}) {
      std::mt19937_64 rng(5);
      reference::Problem problem = reference::randomProblem(spec, 2, 70, rng);
      ChunkOptions opts;
      opts.chunkSize = 16;
      opts.specialize = specialize;
      Outcome r = compare(problem, opts);
      EXPECT_LE(r.outputError, kTolerance)
          << toString(spec.lowRankA) << " specialize " << specialize;
      EXPECT_LE(r.stateError, kTolerance);
    }
}

// The additive rules with a weighted write (write = beta: S' = D S + beta k
// v^T), written as such: the chunk folds beta into the keys it writes with
// and into the intra-chunk products, not into q's reads of the state.
TEST(ChunkwiseOptions, AdditiveRulesWithAWeightedWrite) {
  for (const char *name : {"linear_attn", "retnet", "mamba2", "gla"}) {
    Spec spec = smallSpec(findPreset(name)->spec, 2, true);
    spec.write = WriteWeight::Beta;
    spec.beta = BetaSource::Sigmoid;
    ASSERT_TRUE(validate(spec).empty()) << name;
    std::mt19937_64 rng(11);
    reference::Problem problem = reference::randomProblem(spec, 2, 70, rng);
    ChunkOptions opts;
    opts.chunkSize = 16;
    Outcome r = compare(problem, opts);
    EXPECT_LE(r.outputError, kTolerance) << name;
    EXPECT_LE(r.stateError, kTolerance) << name;
    // beta is read: the unit write's answer is not this one.
    Spec unit = spec;
    unit.write = WriteWeight::One;
    unit.beta = BetaSource::None;
    reference::Problem same = problem;
    same.spec = unit;
    same.beta.clear();
    EXPECT_GT(reference::relativeError(reference::runRecurrent(same).o,
                                       reference::runRecurrent(problem).o),
              1e-3)
        << name;
  }
}

//===----------------------------------------------------------------------===//
// Extreme inputs behave as the reference does: no NaN, no Inf
//===----------------------------------------------------------------------===//

class ExtremeGates : public ::testing::TestWithParam<std::string> {};

TEST_P(ExtremeGates, StrongAndNoDecay) {
  Spec spec = smallSpec(findPreset(GetParam())->spec, 1, true);
  if (spec.decay == DecayKind::None)
    GTEST_SKIP() << "no gate in this form";
  for (double logGate : {-20.0, 0.0}) {
    std::mt19937_64 rng(3);
    reference::Problem problem = reference::randomProblem(spec, 1, 200, rng);
    for (double &g : problem.g)
      g = logGate;
    ChunkOptions opts;
    opts.chunkSize = 64;
    Outcome r = compare(problem, opts);
    EXPECT_LE(r.outputError, kTolerance) << "log gate " << logGate;
    EXPECT_LE(r.stateError, kTolerance) << "log gate " << logGate;
  }
}

INSTANTIATE_TEST_SUITE_P(AllPresets, ExtremeGates,
                         ::testing::ValuesIn(presetNames()));

TEST(ExtremeInputs, BetaZeroAndOne) {
  for (const char *name : {"deltanet", "gdn", "kda"})
    for (double beta : {0.0, 1.0}) {
      Spec spec = smallSpec(findPreset(name)->spec, 1, true);
      std::mt19937_64 rng(4);
      reference::Problem problem = reference::randomProblem(spec, 1, 90, rng);
      for (double &b : problem.beta)
        b = beta;
      ChunkOptions opts;
      opts.chunkSize = 32;
      Outcome r = compare(problem, opts);
      EXPECT_LE(r.outputError, kTolerance) << name << " beta " << beta;
      EXPECT_LE(r.stateError, kTolerance) << name << " beta " << beta;
    }
}

TEST(ExtremeInputs, EmptySequenceKeepsTheInitialState) {
  for (const Preset &preset : presets()) {
    Spec spec = smallSpec(preset.spec, 1, true);
    std::mt19937_64 rng(9);
    reference::Problem problem = reference::randomProblem(spec, 2, 0, rng);
    mlir::MLIRContext ctx;
    std::string error;
    auto module = buildChunkedProgram(ctx, spec, ChunkOptions(), error);
    ASSERT_TRUE(module) << error;
    reference::Result actual;
    ASSERT_TRUE(executeChunked(*module->getOps<ChunkedOp>().begin(), problem,
                               actual, error))
        << error;
    EXPECT_TRUE(actual.o.empty());
    EXPECT_EQ(actual.finalState, problem.initialState) << preset.name;
  }
}

//===----------------------------------------------------------------------===//
// The suite notices a wrong algorithm
//===----------------------------------------------------------------------===//

/// Reading the state after the chunk's update for the output is the classic
/// silent mistake; every preset must fail the tolerance by far.
TEST(WrongPass, ReadingTheUpdatedStateIsCaught) {
  for (const Preset &preset : presets()) {
    Spec spec = smallSpec(preset.spec, 1, true);
    std::mt19937_64 rng(2);
    reference::Problem problem = reference::randomProblem(spec, 1, 100, rng);
    ChunkOptions opts;
    opts.chunkSize = 32;
    opts.testReadUpdatedState = true;
    Outcome r = compare(problem, opts);
    EXPECT_GT(r.outputError, 1e-3) << preset.name;
  }
}

TEST(Executor, RejectsWrongShapes) {
  Spec spec = smallSpec(findPreset("gdn")->spec, 1, true);
  std::mt19937_64 rng(1);
  reference::Problem problem = reference::randomProblem(spec, 1, 10, rng);
  problem.v.pop_back();
  mlir::MLIRContext ctx;
  std::string error;
  auto module = buildChunkedProgram(ctx, spec, ChunkOptions(), error);
  ASSERT_TRUE(module);
  reference::Result result;
  EXPECT_FALSE(executeChunked(*module->getOps<ChunkedOp>().begin(), problem,
                              result, error));
  EXPECT_NE(error.find('v'), std::string::npos) << error;
}

} // namespace
