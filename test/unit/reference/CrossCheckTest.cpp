//===- CrossCheckTest.cpp - Recurrent form against parallel form ----------===//
//
// Part of lina. The recurrent and the parallel form share only the input
// preprocessing (headInputs); on random problems of every preset, layout and
// gate/beta parameterisation they must agree to float64 rounding. Further
// checks tie the layout handling (varlen, batch rows, grouped heads) and the
// delta rule's generic encoding to independent computations.
//
//===----------------------------------------------------------------------===//
#include "TestHelpers.h"

using namespace lina;
using namespace lina::reference;
using namespace lina::reference::testing;

namespace {

constexpr double kTolerance = 1e-12;

/// Runs both forms on `p` and expects finite, non-trivial, agreeing results.
void expectFormsAgree(const Problem &p) {
  ASSERT_EQ(checkShapes(p), "");
  Result recurrent = runRecurrent(p);
  Result parallel = runParallel(p);
  EXPECT_TRUE(allFinite(recurrent.o));
  EXPECT_TRUE(allFinite(recurrent.finalState));
  EXPECT_LE(relativeError(parallel.o, recurrent.o), kTolerance);
  EXPECT_LE(relativeError(parallel.finalState, recurrent.finalState),
            kTolerance);
  // Two all-zero results would agree trivially.
  if (!recurrent.o.empty()) {
    EXPECT_GT(norm(recurrent.o), 1e-3);
  }
}

TEST(CrossCheck, EveryPresetShapeAndInitialState) {
  std::mt19937_64 rng(20241129);
  for (const Preset &preset : presets()) {
    for (bool initialState : {false, true}) {
      Spec spec = smallPreset(preset.name);
      spec.initialState = initialState;
      for (int64_t seqLen : {1, 7, 33}) {
        SCOPED_TRACE(std::string(preset.name) + " T=" + std::to_string(seqLen) +
                     " initialState=" + std::to_string(initialState));
        expectFormsAgree(randomProblem(spec, /*batch=*/2, seqLen, rng));
      }
      // Three packed sequences of lengths 5, 0 and 9.
      SCOPED_TRACE(std::string(preset.name) + " varlen (5, 0, 9)" +
                   " initialState=" + std::to_string(initialState));
      spec.varlen = true;
      expectFormsAgree(randomProblem(spec, 1, 14, rng, {0, 5, 5, 14}));
    }
  }
}

TEST(CrossCheck, ComputedGatesAndBetaActivations) {
  struct Variant {
    const char *preset;
    GateSource gate;
    BetaSource beta;
  };
  const Variant variants[] = {
      {"gdn", GateSource::Softplus, BetaSource::Sigmoid},
      {"gdn", GateSource::LowerBound, BetaSource::TwoSigmoid},
      {"kda", GateSource::Softplus, BetaSource::Sigmoid},
      {"kda", GateSource::LowerBound, BetaSource::TwoSigmoid},
      {"deltanet", GateSource::Given, BetaSource::TwoSigmoid},
      {"mamba2", GateSource::LowerBound, BetaSource::None},
      {"gla", GateSource::Softplus, BetaSource::None},
      {"rwkv7", GateSource::Softplus, BetaSource::None},
  };
  std::mt19937_64 rng(7);
  for (const Variant &variant : variants) {
    Spec spec = smallPreset(variant.preset);
    spec.gate = variant.gate;
    spec.beta = variant.beta;
    spec.initialState = true;
    SCOPED_TRACE(std::string(variant.preset) + " gate=" +
                 toString(variant.gate) + " beta=" + toString(variant.beta));
    ASSERT_TRUE(validate(spec).empty());
    expectFormsAgree(randomProblem(spec, 2, 33, rng));
    spec.varlen = true;
    expectFormsAgree(randomProblem(spec, 1, 14, rng, {0, 5, 5, 14}));
  }
}

TEST(CrossCheck, DeltaRuleMatchesItsTextbookForm) {
  // The reference encodes the delta rule as b = beta k, a = -(D k), w = beta.
  // Here the documented form S = (I - beta k k^T) D S + beta k v^T is stepped
  // directly from q, k, v, logD and beta.
  std::mt19937_64 rng(11);
  for (const char *name : {"deltanet", "gdn", "kda"}) {
    SCOPED_TRACE(name);
    Spec spec = smallPreset(name);
    Problem p = randomProblem(spec, 1, 17, rng);
    Result result = runRecurrent(p);
    const int64_t K = spec.keyDim, V = spec.valueDim, HV = spec.valueHeads;
    for (int64_t hv = 0; hv < HV; ++hv) {
      HeadInputs in = headInputs(p, 0, hv);
      std::vector<double> S(p.initialState.begin() + hv * K * V,
                            p.initialState.begin() + (hv + 1) * K * V);
      for (int64_t t = 0; t < in.len; ++t) {
        const double *k = &in.k[t * K], *v = &in.v[t * V];
        const double beta = in.w[t];
        for (int64_t c = 0; c < K; ++c) // D S
          for (int64_t j = 0; j < V; ++j)
            S[c * V + j] *= std::exp(in.logD[t * K + c]);
        for (int64_t j = 0; j < V; ++j) {
          double kS = 0; // (k^T D S)_j
          for (int64_t c = 0; c < K; ++c)
            kS += k[c] * S[c * V + j];
          for (int64_t c = 0; c < K; ++c)
            S[c * V + j] += beta * k[c] * (v[j] - kS);
        }
        for (int64_t j = 0; j < V; ++j) {
          double o = 0;
          for (int64_t c = 0; c < K; ++c)
            o += in.q[t * K + c] * S[c * V + j];
          EXPECT_NEAR(result.o[(t * HV + hv) * V + j], o,
                      1e-13 * (1 + std::abs(o)));
        }
      }
      std::vector<double> finalState(result.finalState.begin() + hv * K * V,
                                     result.finalState.begin() +
                                         (hv + 1) * K * V);
      EXPECT_LE(relativeError(finalState, S), 1e-13);
    }
  }
}

/// Tokens [begin, end) of a tensor laid out [tokens, perToken].
std::vector<double> sliceTokens(const std::vector<double> &tensor,
                                int64_t perToken, int64_t begin, int64_t end) {
  if (tensor.empty())
    return {};
  return std::vector<double>(tensor.begin() + begin * perToken,
                             tensor.begin() + end * perToken);
}

/// The sub-problem of tokens [begin, end) of `p` as one batch-1, non-varlen
/// problem, with `state` (if any) as its initial state.
Problem subProblem(const Problem &p, int64_t begin, int64_t end,
                   int64_t stateIndex) {
  const Spec &s = p.spec;
  const int64_t H = s.heads, HV = s.valueHeads, K = s.keyDim, V = s.valueDim;
  Problem sub = p;
  sub.spec.varlen = false;
  sub.batch = 1;
  sub.seqLen = end - begin;
  sub.cuSeqlens.clear();
  sub.q = sliceTokens(p.q, H * K, begin, end);
  sub.k = sliceTokens(p.k, H * K, begin, end);
  sub.v = sliceTokens(p.v, HV * V, begin, end);
  if (s.decay != DecayKind::FixedPerHead)
    sub.g = sliceTokens(p.g, HV * s.gateWidth(), begin, end);
  sub.beta = sliceTokens(p.beta, HV, begin, end);
  sub.a = sliceTokens(p.a, HV * K, begin, end);
  sub.b = sliceTokens(p.b, HV * K, begin, end);
  sub.initialState =
      sliceTokens(p.initialState, HV * K * V, stateIndex, stateIndex + 1);
  return sub;
}

TEST(CrossCheck, VarlenAndBatchRowsEqualSeparateProblems) {
  std::mt19937_64 rng(5);
  for (const char *name : {"retnet", "kda", "rwkv7"}) {
    for (bool varlen : {false, true}) {
      SCOPED_TRACE(std::string(name) + (varlen ? " varlen" : " batch"));
      Spec spec = smallPreset(name);
      spec.varlen = varlen;
      spec.gate = GateSource::Given;
      Problem p = varlen ? randomProblem(spec, 1, 14, rng, {0, 5, 5, 14})
                         : randomProblem(spec, 3, 6, rng);
      ASSERT_EQ(checkShapes(p), "");
      Result whole = runRecurrent(p);
      const int64_t HV = spec.valueHeads, K = spec.keyDim, V = spec.valueDim;
      std::vector<int64_t> bounds =
          varlen ? p.cuSeqlens : std::vector<int64_t>{0, 6, 12, 18};
      for (size_t n = 0; n + 1 < bounds.size(); ++n) {
        Problem sub = subProblem(p, bounds[n], bounds[n + 1], n);
        ASSERT_EQ(checkShapes(sub), "");
        Result part = runRecurrent(sub);
        // Same arithmetic in the same order: exactly equal.
        EXPECT_EQ(part.o,
                  sliceTokens(whole.o, HV * V, bounds[n], bounds[n + 1]));
        EXPECT_EQ(part.finalState,
                  sliceTokens(whole.finalState, HV * K * V, n, n + 1));
      }
    }
  }
}

TEST(CrossCheck, GroupedHeadsEqualDuplicatedHeads) {
  // H = 2 q/k heads for HV = 4 value heads is the same problem as H = 4 with
  // q/k head h copied to value heads 2h and 2h + 1.
  std::mt19937_64 rng(3);
  for (const char *name : {"gla", "gdn"}) {
    SCOPED_TRACE(name);
    Spec spec = smallPreset(name);
    Problem grouped = randomProblem(spec, 2, 9, rng);
    Problem expanded = grouped;
    expanded.spec.heads = spec.valueHeads;
    const int64_t K = spec.keyDim, tokens = grouped.batch * grouped.seqLen;
    const int64_t H = spec.heads, HV = spec.valueHeads;
    expanded.q.assign(tokens * HV * K, 0.0);
    expanded.k.assign(tokens * HV * K, 0.0);
    for (int64_t token = 0; token < tokens; ++token)
      for (int64_t hv = 0; hv < HV; ++hv)
        for (int64_t c = 0; c < K; ++c) {
          const int64_t from = (token * H + hv / (HV / H)) * K + c;
          expanded.q[(token * HV + hv) * K + c] = grouped.q[from];
          expanded.k[(token * HV + hv) * K + c] = grouped.k[from];
        }
    ASSERT_EQ(checkShapes(expanded), "");
    Result a = runRecurrent(grouped), b = runRecurrent(expanded);
    EXPECT_EQ(a.o, b.o);
    EXPECT_EQ(a.finalState, b.finalState);
  }
}

} // namespace
