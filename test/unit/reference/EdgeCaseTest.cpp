//===- EdgeCaseTest.cpp - Extreme gates, beta 0 and 1, empty sequences ----===//
//
// Part of lina. The inputs where a careless formula overflows, divides by
// zero or indexes past the end: cumulative log gates of -2000, gates of
// exactly 0, beta at the ends of its range, and sequences with no tokens.
//
//===----------------------------------------------------------------------===//
#include "TestHelpers.h"

using namespace lina;
using namespace lina::reference;
using namespace lina::reference::testing;

namespace {

/// Expects both forms to give finite results that agree to `tolerance`.
void expectFiniteAndAgree(const Problem &p, double tolerance = 1e-12) {
  ASSERT_EQ(checkShapes(p), "");
  Result recurrent = runRecurrent(p);
  Result parallel = runParallel(p);
  EXPECT_TRUE(allFinite(recurrent.o));
  EXPECT_TRUE(allFinite(recurrent.finalState));
  EXPECT_TRUE(allFinite(parallel.o));
  EXPECT_TRUE(allFinite(parallel.finalState));
  EXPECT_LE(relativeError(parallel.o, recurrent.o), tolerance);
  EXPECT_LE(relativeError(parallel.finalState, recurrent.finalState),
            tolerance);
}

const char *const kGatedPresets[] = {"mamba2", "gla", "gdn", "kda", "rwkv7"};

TEST(ExtremeGates, ConstantLogGateOfMinus20AndOfZero) {
  // Over T = 100 a gate of -20 per step sums to -2000: e^{+2000} overflows,
  // so the parallel form must only ever exponentiate differences.
  std::mt19937_64 rng(99);
  for (const char *name : kGatedPresets) {
    for (double gate : {-20.0, 0.0}) {
      SCOPED_TRACE(std::string(name) + " g=" + std::to_string(gate));
      Problem p = randomProblem(smallPreset(name), 1, 100, rng);
      std::fill(p.g.begin(), p.g.end(), gate);
      expectFiniteAndAgree(p);
    }
  }
}

TEST(ExtremeGates, PerChannelMixOfMinus20AndZero) {
  // Channels that forget at once next to channels that never forget, changing
  // from token to token.
  std::mt19937_64 rng(98);
  for (const char *name : {"gla", "kda", "rwkv7"}) {
    SCOPED_TRACE(name);
    Problem p = randomProblem(smallPreset(name), 1, 100, rng);
    std::bernoulli_distribution coin(0.5);
    for (double &g : p.g)
      g = coin(rng) ? -20.0 : 0.0;
    expectFiniteAndAgree(p);
  }
}

TEST(ExtremeGates, ComputedGateWithHugePreActivations) {
  // softplus(1000) computed naively is inf; -exp(A_log) * 1000 per step with
  // A_log up to log 16 sums to about -1.6e6 over 100 steps.
  std::mt19937_64 rng(97);
  for (const char *name : {"gdn", "kda"}) {
    for (GateSource gate : {GateSource::Softplus, GateSource::LowerBound}) {
      SCOPED_TRACE(std::string(name) + " " + toString(gate));
      Spec spec = smallPreset(name);
      spec.gate = gate;
      Problem p = randomProblem(spec, 1, 100, rng);
      std::bernoulli_distribution coin(0.5);
      for (double &x : p.g)
        x = coin(rng) ? 1000.0 : -1000.0;
      expectFiniteAndAgree(p);
    }
  }
}

TEST(ExtremeBeta, ZeroKeepsTheStateAndOneAgrees) {
  std::mt19937_64 rng(42);
  for (const char *name : {"deltanet", "gdn", "kda"}) {
    for (double beta : {0.0, 1.0}) {
      SCOPED_TRACE(std::string(name) + " beta=" + std::to_string(beta));
      Problem p = randomProblem(smallPreset(name), 1, 33, rng);
      std::fill(p.beta.begin(), p.beta.end(), beta);
      expectFiniteAndAgree(p);
    }
  }
  // DeltaNet has no decay: with beta = 0 nothing is ever written or erased,
  // so the state stays S0 and o_t = S0^T q_t.
  Problem p = randomProblem(smallPreset("deltanet"), 1, 5, rng);
  std::fill(p.beta.begin(), p.beta.end(), 0.0);
  Result result = runRecurrent(p);
  EXPECT_EQ(result.finalState, p.initialState);
  const int64_t K = p.spec.keyDim, V = p.spec.valueDim;
  const int64_t HV = p.spec.valueHeads;
  for (int64_t hv = 0; hv < HV; ++hv) {
    HeadInputs in = headInputs(p, 0, hv);
    for (int64_t t = 0; t < in.len; ++t)
      for (int64_t j = 0; j < V; ++j) {
        double expected = 0;
        for (int64_t c = 0; c < K; ++c)
          expected += in.q[t * K + c] * p.initialState[(hv * K + c) * V + j];
        EXPECT_NEAR(result.o[(t * HV + hv) * V + j], expected, 1e-13);
      }
  }
}

TEST(EmptySequences, ZeroTokensLeaveTheInitialState) {
  std::mt19937_64 rng(1);
  for (const Preset &preset : presets()) {
    SCOPED_TRACE(preset.name);
    Spec spec = smallPreset(preset.name);
    // Batch of two empty rows.
    Problem p = randomProblem(spec, 2, 0, rng);
    ASSERT_EQ(checkShapes(p), "");
    for (const Result &r : {runRecurrent(p), runParallel(p)}) {
      EXPECT_TRUE(r.o.empty());
      EXPECT_EQ(r.finalState, p.initialState);
    }
    // Without an initial state the final state is zero, still [N, HV, K, V].
    spec.initialState = false;
    p = randomProblem(spec, 2, 0, rng);
    std::vector<double> zeros(2 * spec.valueHeads * spec.keyDim * spec.valueDim,
                              0.0);
    for (const Result &r : {runRecurrent(p), runParallel(p)})
      EXPECT_EQ(r.finalState, zeros);
    // Varlen: two empty sequences.
    spec.initialState = true;
    spec.varlen = true;
    p = randomProblem(spec, 1, 0, rng, {0, 0, 0});
    ASSERT_EQ(checkShapes(p), "");
    for (const Result &r : {runRecurrent(p), runParallel(p)}) {
      EXPECT_TRUE(r.o.empty());
      EXPECT_EQ(r.finalState, p.initialState);
    }
  }
}

} // namespace
