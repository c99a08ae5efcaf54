//===- ProblemTest.cpp - checkShapes, relativeError, randomProblem --------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "TestHelpers.h"

#include "gmock/gmock.h"

#include <functional>
#include <limits>

using namespace lina;
using namespace lina::reference;
using namespace lina::reference::testing;
using ::testing::HasSubstr;
using ::testing::StartsWith;

namespace {

/// A consistent problem of `preset` (small dims, T = 3, batch 2), optionally
/// varlen with cuSeqlens (0, 2, 3) and batch 1.
Problem goodProblem(const char *preset, bool varlen = false) {
  std::mt19937_64 rng(0);
  Spec spec = smallPreset(preset);
  spec.varlen = varlen;
  Problem p = varlen ? randomProblem(spec, 1, 3, rng, {0, 2, 3})
                     : randomProblem(spec, 2, 3, rng);
  EXPECT_EQ(checkShapes(p), "");
  return p;
}

struct BadCase {
  const char *what;
  const char *preset;
  bool varlen;
  std::function<void(Problem &)> breakIt;
  const char *mustMention; ///< the quoted tensor name, and maybe more
};

TEST(CheckShapes, NamesTheTensorOfEachBadInput) {
  const double x = 0.5;
  const BadCase cases[] = {
      {"q short", "gla", false, [](Problem &p) { p.q.pop_back(); }, "'q'"},
      {"k long", "gla", false, [&](Problem &p) { p.k.push_back(x); }, "'k'"},
      {"v short", "gla", false, [](Problem &p) { p.v.pop_back(); }, "'v'"},
      {"g per-channel short", "gla", false, [](Problem &p) { p.g.pop_back(); },
       "'g'"},
      {"g scalar with K per token", "mamba2", false,
       [](Problem &p) { p.g.resize(p.g.size() * 8); }, "'g'"},
      {"g fixed per token", "retnet", false,
       [](Problem &p) { p.g.resize(p.g.size() * 2); }, "'g'"},
      {"g with decay none", "linear_attn", false, [](Problem &p) { p.g = {0}; },
       "'g'"},
      {"A_log missing", "gdn", false,
       [](Problem &p) {
         p.spec.gate = GateSource::Softplus;
         p.g.assign(p.g.size(), 0.0);
       },
       "'gateALog' (A_log) is missing"},
      {"A_log wrong size", "gdn", false,
       [](Problem &p) {
         p.spec.gate = GateSource::LowerBound;
         p.gateALog = {0};
       },
       "'gateALog'"},
      {"A_log with a given gate", "gdn", false,
       [](Problem &p) { p.gateALog.assign(4, 0.0); }, "'gateALog'"},
      {"dt_bias per channel for a scalar gate", "gdn", false,
       [](Problem &p) {
         p.spec.gate = GateSource::Softplus;
         p.gateALog.assign(4, 0.0);
         p.gateDtBias.assign(4 * 8, 0.0);
       },
       "'gateDtBias'"},
      {"dt_bias with a given gate", "kda", false,
       [](Problem &p) { p.gateDtBias.assign(4 * 8, 0.0); }, "'gateDtBias'"},
      {"beta missing", "gdn", false, [](Problem &p) { p.beta.clear(); },
       "'beta'"},
      {"beta without delta", "gla", false,
       [](Problem &p) { p.beta.assign(2 * 3 * 4, 0.5); }, "'beta'"},
      {"a missing", "rwkv7", false, [](Problem &p) { p.a.clear(); }, "'a'"},
      {"b short", "rwkv7", false, [](Problem &p) { p.b.pop_back(); }, "'b'"},
      {"a without dplr", "kda", false,
       [](Problem &p) { p.a.assign(2 * 3 * 4 * 8, 0.0); }, "'a'"},
      {"initial state short", "kda", false,
       [](Problem &p) { p.initialState.pop_back(); }, "'initialState'"},
      {"initial state not asked for", "kda", false,
       [](Problem &p) { p.spec.initialState = false; }, "'initialState'"},
      {"initial state for one of two varlen sequences", "kda", true,
       [](Problem &p) { p.initialState.resize(p.initialState.size() / 2); },
       "'initialState'"},
      {"varlen with batch 2", "gla", true, [](Problem &p) { p.batch = 2; },
       "'batch' must be 1"},
      {"cuSeqlens empty", "gla", true, [](Problem &p) { p.cuSeqlens.clear(); },
       "'cuSeqlens'"},
      {"cuSeqlens not from 0", "gla", true,
       [](Problem &p) {
         p.cuSeqlens = {1, 2, 3};
       },
       "'cuSeqlens' must start"},
      {"cuSeqlens not to T", "gla", true,
       [](Problem &p) {
         p.cuSeqlens = {0, 2, 2};
       },
       "'cuSeqlens' must end"},
      {"cuSeqlens decreasing", "gla", true,
       [](Problem &p) {
         p.cuSeqlens = {0, 3, 2, 3};
       },
       "'cuSeqlens' must be non-decreasing"},
      {"cuSeqlens without varlen", "gla", false,
       [](Problem &p) {
         p.cuSeqlens = {0, 3};
       },
       "'cuSeqlens'"},
      {"negative T", "gla", false, [](Problem &p) { p.seqLen = -1; },
       "'seqLen'"},
      {"negative batch", "gla", false, [](Problem &p) { p.batch = -1; },
       "'batch'"},
      {"bad spec", "gla", false, [](Problem &p) { p.spec.heads = 3; },
       "spec: value_heads"},
  };
  for (const BadCase &c : cases) {
    SCOPED_TRACE(c.what);
    Problem p = goodProblem(c.preset, c.varlen);
    c.breakIt(p);
    EXPECT_THAT(checkShapes(p), HasSubstr(c.mustMention));
  }
}

TEST(CheckShapes, MessageGivesTheExpectedShapeInSymbolsAndNumbers) {
  Problem p = goodProblem("gla"); // B = 2, T = 3, H = 2, K = 8
  p.q.pop_back();
  EXPECT_EQ(checkShapes(p), "'q' has 95 values, expected shape [B, T, H, K] "
                            "= [2, 3, 2, 8] (96 values)");
}

TEST(CheckShapes, AcceptsOptionalDtBiasAndHugeSizesDoNotWrap) {
  // dt_bias may be empty (zero bias) or present.
  Problem p = goodProblem("kda");
  p.spec.gate = GateSource::Softplus;
  p.gateALog.assign(4, 0.0);
  EXPECT_EQ(checkShapes(p), "");
  p.gateDtBias.assign(4 * 8, 0.0);
  EXPECT_EQ(checkShapes(p), "");
  // With B = 2^62 + 2 every element count, taken modulo 2^64, equals the
  // size of the B = 2 buffers (each is B times a multiple of 4, and 4 * 2^62
  // wraps to 0): only an overflow check notices.
  p = goodProblem("gla");
  p.batch = (int64_t(1) << 62) + 2;
  EXPECT_THAT(checkShapes(p),
              StartsWith("'q' has 96 values, expected shape [B, T, H, K] = "
                         "[4611686018427387906, 3, 2, 8] (more values than "
                         "int64_t can count)"));
}

TEST(CheckShapesDeathTest, RunningAnInconsistentProblemStops) {
  Problem p = goodProblem("gla");
  p.v.pop_back();
  EXPECT_DEATH(runRecurrent(p), "runRecurrent: 'v' has");
  EXPECT_DEATH(runParallel(p), "runParallel: 'v' has");
}

TEST(NumSequences, BatchOrVarlenSegments) {
  EXPECT_EQ(goodProblem("gla").numSequences(), 2);
  EXPECT_EQ(goodProblem("gla", /*varlen=*/true).numSequences(), 2);
  Problem p = goodProblem("gla", true);
  p.cuSeqlens.clear();
  EXPECT_EQ(p.numSequences(), 0);
}

TEST(RelativeError, Values) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(relativeError({1, 2}, {1, 2}), 0.0);
  // ||(0, 2)|| / ||(1, 0)|| = 2.
  EXPECT_DOUBLE_EQ(relativeError({1, 2}, {1, 0}), 2.0);
  // x - y = (3, -1): sqrt(10) / ||(0, 5)||.
  EXPECT_DOUBLE_EQ(relativeError({3, 4}, {0, 5}), std::sqrt(10.0) / 5);
  // Magnitudes whose squares overflow.
  EXPECT_DOUBLE_EQ(relativeError({2e200}, {1e200}), 1.0);
  EXPECT_EQ(relativeError({}, {}), 0.0);
  EXPECT_EQ(relativeError({0, 0}, {0, 0}), 0.0);
  EXPECT_EQ(relativeError({1, 0}, {0, 0}), inf);
}

TEST(RelativeError, NonFiniteOrMismatchedIsInfinite) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(relativeError({nan, 1}, {1, 1}), inf);
  EXPECT_EQ(relativeError({1, nan}, {1, 1}), inf);
  EXPECT_EQ(relativeError({inf, 1}, {1, 1}), inf);
  EXPECT_EQ(relativeError({-inf}, {1}), inf);
  EXPECT_EQ(relativeError({1, 1}, {nan, 1}), inf);
  EXPECT_EQ(relativeError({1, 1}, {1, 1, 1}), inf);
}

TEST(RandomProblem, ConsistentForEveryPresetAndReproducible) {
  for (const Preset &preset : presets()) {
    SCOPED_TRACE(preset.name);
    Spec spec = smallPreset(preset.name);
    std::mt19937_64 rng1(17), rng2(17), rng3(18);
    Problem p1 = randomProblem(spec, 2, 5, rng1);
    Problem p2 = randomProblem(spec, 2, 5, rng2);
    Problem p3 = randomProblem(spec, 2, 5, rng3);
    EXPECT_EQ(checkShapes(p1), "");
    EXPECT_EQ(p1.q, p2.q);
    EXPECT_EQ(p1.g, p2.g);
    EXPECT_EQ(p1.initialState, p2.initialState);
    EXPECT_NE(p1.q, p3.q);
    spec.varlen = true;
    EXPECT_EQ(checkShapes(randomProblem(spec, 1, 9, rng1, {0, 4, 9})), "");
    // A varlen spec without boundaries is one sequence.
    EXPECT_EQ(randomProblem(spec, 1, 9, rng1).cuSeqlens,
              (std::vector<int64_t>{0, 9}));
  }
}

/// The L2 norm of each row of \p rowLength values.
std::vector<double> rowNorms(const std::vector<double> &values,
                             int64_t rowLength) {
  std::vector<double> norms;
  for (size_t row = 0; row < values.size(); row += rowLength) {
    double sumSquares = 0;
    for (int64_t c = 0; c < rowLength; ++c)
      sumSquares += values[row + c] * values[row + c];
    norms.push_back(std::sqrt(sumSquares));
  }
  return norms;
}

TEST(RandomProblem, KeysAreUnitNormWhereTheDeltaRuleDoesNotNormalise) {
  // I - beta k k^T expands the state where ||k||^2 > 2 / beta: a delta rule
  // without qk_l2norm on N(0, 1) keys of 32 channels overflowed float64
  // within a few hundred tokens.
  Spec raw = smallPreset("deltanet");
  raw.qkL2Norm = false;
  raw.keyDim = 32;
  std::mt19937_64 rng(5);
  Problem p = randomProblem(raw, 2, 300, rng);
  for (double norm : rowNorms(p.k, raw.keyDim))
    EXPECT_NEAR(norm, 1.0, 1e-12);
  EXPECT_TRUE(isFinite(runRecurrent(p)));
  // Where the kernel normalises them, keys keep fla's N(0, 1) draw.
  Problem normalised = randomProblem(smallPreset("gdn"), 2, 50, rng);
  double largest = 0;
  for (double norm : rowNorms(normalised.k, smallPreset("gdn").keyDim))
    largest = std::max(largest, norm);
  EXPECT_GT(largest, 1.5);
}

TEST(IsFinite, AnInfOrNaNAnywhereIsNotFinite) {
  Result r{{1.0, 2.0}, {3.0}};
  EXPECT_TRUE(isFinite(r));
  r.finalState[0] = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(isFinite(r));
  r.finalState[0] = 0;
  r.o[1] = std::nan("");
  EXPECT_FALSE(isFinite(r));
}

TEST(RandomProblem, DistributionsFollowFla) {
  std::mt19937_64 rng(23);
  // Given log gates: logsigmoid(N(0,1)) <= 0; per channel also >= -5.
  Problem mamba = randomProblem(smallPreset("mamba2"), 2, 50, rng);
  for (double g : mamba.g)
    EXPECT_LT(g, 0.0);
  Problem gla = randomProblem(smallPreset("gla"), 2, 50, rng);
  for (double g : gla.g) {
    EXPECT_LT(g, 0.0);
    EXPECT_GE(g, -5.0);
  }
  // beta = sigmoid(N(0, 1)) is in (0, 1).
  Problem gdn = randomProblem(smallPreset("gdn"), 2, 50, rng);
  for (double beta : gdn.beta) {
    EXPECT_GT(beta, 0.0);
    EXPECT_LT(beta, 1.0);
  }
  // dplr: |a| = 1, a >= 0, and b = -s a with one s in (0, 1) per row.
  Problem rwkv = randomProblem(smallPreset("rwkv7"), 1, 20, rng);
  const int64_t K = 8;
  for (size_t row = 0; row < rwkv.a.size() / K; ++row) {
    double sumSquares = 0;
    for (int64_t c = 0; c < K; ++c) {
      EXPECT_GE(rwkv.a[row * K + c], 0.0);
      sumSquares += rwkv.a[row * K + c] * rwkv.a[row * K + c];
    }
    EXPECT_NEAR(sumSquares, 1.0, 1e-14);
    double s = -rwkv.b[row * K] / rwkv.a[row * K];
    EXPECT_GT(s, 0.0);
    EXPECT_LT(s, 1.0);
    for (int64_t c = 0; c < K; ++c)
      EXPECT_NEAR(rwkv.b[row * K + c], -s * rwkv.a[row * K + c], 1e-15);
  }
  // Fixed decay: every head decays noticeably, even past 32 heads.
  Spec retnet = smallPreset("retnet");
  retnet.heads = 1;
  retnet.valueHeads = 64;
  Problem r = randomProblem(retnet, 1, 1, rng);
  ASSERT_EQ(r.g.size(), 64u);
  EXPECT_DOUBLE_EQ(r.g[0], std::log(1 - 1.0 / 32));
  for (double g : r.g) {
    EXPECT_TRUE(std::isfinite(g));
    EXPECT_LE(g, -std::ldexp(1.0, -38));
  }
  // Computed gates: A_log = log U(1, 16), dt_bias small, per channel.
  Spec kda = smallPreset("kda");
  kda.gate = GateSource::Softplus;
  Problem k = randomProblem(kda, 1, 4, rng);
  ASSERT_EQ(k.gateALog.size(), 4u);
  ASSERT_EQ(k.gateDtBias.size(), 4u * 8);
  for (double aLog : k.gateALog) {
    EXPECT_GE(aLog, 0.0);
    EXPECT_LE(aLog, std::log(16.0));
  }
  for (double bias : k.gateDtBias)
    EXPECT_LT(std::abs(bias), 1.0);
}

} // namespace
