//===- HandWorkedTest.cpp - Reference results worked out by hand ----------===//
//
// Part of lina. Tiny problems whose answers are derived in the comments, so a
// mistake shared by the recurrent and the parallel form (which the cross-checks
// cannot see) still shows up. Every case runs through both forms.
//
//===----------------------------------------------------------------------===//
#include "TestHelpers.h"

using namespace lina;
using namespace lina::reference;
using namespace lina::reference::testing;

namespace {

/// Runs both forms and checks each against the hand-worked answer.
void expectBothForms(const Problem &p, const std::vector<double> &o,
                     const std::vector<double> &finalState) {
  ASSERT_EQ(checkShapes(p), "");
  Result recurrent = runRecurrent(p);
  Result parallel = runParallel(p);
  {
    SCOPED_TRACE("recurrent o");
    expectValues(recurrent.o, o);
  }
  {
    SCOPED_TRACE("recurrent final state");
    expectValues(recurrent.finalState, finalState);
  }
  {
    SCOPED_TRACE("parallel o");
    expectValues(parallel.o, o);
  }
  {
    SCOPED_TRACE("parallel final state");
    expectValues(parallel.finalState, finalState);
  }
}

Problem emptyProblem(const Spec &spec, int64_t seqLen) {
  Problem p;
  p.spec = spec;
  p.batch = 1;
  p.seqLen = seqLen;
  return p;
}

TEST(HandWorked, AdditiveScalarDecay) {
  // K = V = 1, q = k = 1, D_t = 0.5, v = 1, 2, 4:
  //   S1 = 1, S2 = 0.5 * 1 + 2 = 2.5, S3 = 0.5 * 2.5 + 4 = 5.25; o_t = S_t.
  Problem p = emptyProblem(tinySpec(DecayKind::Scalar, UpdateRule::Additive,
                                    /*keyDim=*/1, /*valueDim=*/1),
                           3);
  p.q = {1, 1, 1};
  p.k = {1, 1, 1};
  p.v = {1, 2, 4};
  p.g.assign(3, std::log(0.5));
  expectBothForms(p, {1, 2.5, 5.25}, {5.25});
}

TEST(HandWorked, AdditiveScalarDecayWithInitialState) {
  // As above with S0 = 2: S1 = 0.5 * 2 + 1 = 2, S2 = 1 + 2 = 3,
  // S3 = 1.5 + 4 = 5.5. The decay acts on S0 too, from the first token on.
  Spec spec = tinySpec(DecayKind::Scalar, UpdateRule::Additive, 1, 1);
  spec.initialState = true;
  Problem p = emptyProblem(spec, 3);
  p.q = {1, 1, 1};
  p.k = {1, 1, 1};
  p.v = {1, 2, 4};
  p.g.assign(3, std::log(0.5));
  p.initialState = {2};
  expectBothForms(p, {2, 3, 5.5}, {5.5});
}

TEST(HandWorked, PerChannelDecayWithInitialState) {
  // GLA, K = 2, V = 1, S0 = (4, 4), D = Diag(0.5, 1), k = (1, 1), v = 1,
  // q = (1, 1):
  //   S1 = (2 + 1, 4 + 1) = (3, 5),     o1 = 8
  //   S2 = (1.5 + 1, 5 + 1) = (2.5, 6), o2 = 8.5
  Spec spec = tinySpec(DecayKind::PerChannel, UpdateRule::Additive, 2, 1);
  spec.initialState = true;
  Problem p = emptyProblem(spec, 2);
  p.q = {1, 1, 1, 1};
  p.k = {1, 1, 1, 1};
  p.v = {1, 1};
  p.g = {std::log(0.5), 0, std::log(0.5), 0};
  p.initialState = {4, 4};
  expectBothForms(p, {8, 8.5}, {2.5, 6});
}

TEST(HandWorked, FixedDecayWithGroupedValueHeads) {
  // RetNet, one q/k head shared by two value heads, K = V = 1, q = k = 1,
  // gamma = 0.5 for head 0 and 0.25 for head 1, v = 1 (head 0), 4 (head 1):
  //   head 0: S1 = 1, S2 = 0.5 + 1 = 1.5
  //   head 1: S1 = 4, S2 = 1 + 4 = 5
  // o is [B, T, HV, V]: (t1 h0, t1 h1, t2 h0, t2 h1) = (1, 4, 1.5, 5).
  Spec spec = tinySpec(DecayKind::FixedPerHead, UpdateRule::Additive, 1, 1);
  spec.valueHeads = 2;
  Problem p = emptyProblem(spec, 2);
  p.q = {1, 1};
  p.k = {1, 1};
  p.v = {1, 4, 1, 4};
  p.g = {std::log(0.5), std::log(0.25)};
  expectBothForms(p, {1, 4, 1.5, 5}, {1.5, 5});
}

TEST(HandWorked, DeltaRuleReplacesTheValueStoredUnderAKey) {
  // DeltaNet, K = V = 2, no decay.
  //   t1: k = e1, v = (1, 2), beta = 1: S1 = e1 (1, 2)^T; q = e1: o1 = (1, 2).
  //   t2: k = e1, v = (3, 4), beta = 1: (I - e1 e1^T) erases row 1, so
  //       S2 = e1 (3, 4)^T and q = e1 reads o2 = (3, 4), not (4, 6).
  //   t3: k = e2, v = (2, 2), beta = 0.5: row 2 of S2 is 0, so
  //       S3 = [[3, 4], [1, 1]]; q = (1, 1): o3 = (4, 5).
  Problem p =
      emptyProblem(tinySpec(DecayKind::None, UpdateRule::Delta, 2, 2), 3);
  p.q = {1, 0, 1, 0, 1, 1};
  p.k = {1, 0, 1, 0, 0, 1};
  p.v = {1, 2, 3, 4, 2, 2};
  p.beta = {1, 1, 0.5};
  expectBothForms(p, {1, 2, 3, 4, 4, 5}, {3, 4, 1, 1});
}

TEST(HandWorked, GatedDeltaRuleScalar) {
  // GDN, K = V = 1: S1 = (1 - beta k k) e^g S0 + beta k v with S0 = 4,
  // e^g = 0.5, beta = 0.5, k = 1, v = 2: (0.5)(2) + 1 = 2; q = 1: o1 = 2.
  Spec spec = tinySpec(DecayKind::Scalar, UpdateRule::Delta, 1, 1);
  spec.initialState = true;
  Problem p = emptyProblem(spec, 1);
  p.q = {1};
  p.k = {1};
  p.v = {2};
  p.g = {std::log(0.5)};
  p.beta = {0.5};
  p.initialState = {4};
  expectBothForms(p, {2}, {2});
}

TEST(HandWorked, KdaDecaysBeforeErasing) {
  // KDA, K = 2, V = 1: S1 = (I - beta k k^T) D S0 + beta k v with S0 = (4, 4),
  // D = Diag(0.5, 1), k = (0.6, 0.8) (unit), beta = 1, v = 0:
  //   D S0 = (2, 4), k^T D S0 = 1.2 + 3.2 = 4.4,
  //   S1 = (2, 4) - 4.4 (0.6, 0.8) = (-0.64, 0.48); q = (1, 2): o1 = 0.32.
  // Erasing before decaying, D (I - k k^T) S0, would give (0.32, -0.48).
  Spec spec = tinySpec(DecayKind::PerChannel, UpdateRule::Delta, 2, 1);
  spec.initialState = true;
  Problem p = emptyProblem(spec, 1);
  p.q = {1, 2};
  p.k = {0.6, 0.8};
  p.v = {0};
  p.g = {std::log(0.5), 0};
  p.beta = {1};
  p.initialState = {4, 4};
  expectBothForms(p, {0.32}, {-0.64, 0.48});
}

TEST(HandWorked, DplrWithIdentityDecay) {
  // D = I, K = 2, V = 1, S0 = (1, 2).
  //   t1: a = e1, b = -e1: D + b a^T = I - e1 e1^T zeroes row 1;
  //       k = (1, 1), v = 3: S1 = (0, 2) + (3, 3) = (3, 5); q = e1: o1 = 3.
  //   t2: a = e1, b = e2: b a^T S1 adds row 1 of S1 (= 3) to row 2;
  //       k = (0, 1), v = 1: S2 = (3, 5 + 3 + 1) = (3, 9); q = (1, 1): o2 = 12.
  Spec spec = tinySpec(DecayKind::None, UpdateRule::DPLR, 2, 1);
  spec.initialState = true;
  Problem p = emptyProblem(spec, 2);
  p.q = {1, 0, 1, 1};
  p.k = {1, 1, 0, 1};
  p.v = {3, 1};
  p.a = {1, 0, 1, 0};
  p.b = {-1, 0, 0, 1};
  p.initialState = {1, 2};
  expectBothForms(p, {3, 12}, {3, 9});
}

TEST(HandWorked, VarlenSequencesStartFromTheirOwnState) {
  // Linear attention, K = V = 1, q = k = 1, cuSeqlens = (0, 1, 3),
  // initial states 10 and 20, v = 1, 2, 3:
  //   sequence 0: S = 11 -> o = 11
  //   sequence 1: S = 22, then 25 -> o = 22, 25
  // Carrying the state across the boundary would give 13 and 16.
  Spec spec = tinySpec(DecayKind::None, UpdateRule::Additive, 1, 1);
  spec.initialState = true;
  spec.varlen = true;
  Problem p = emptyProblem(spec, 3);
  p.cuSeqlens = {0, 1, 3};
  p.q = {1, 1, 1};
  p.k = {1, 1, 1};
  p.v = {1, 2, 3};
  p.initialState = {10, 20};
  expectBothForms(p, {11, 22, 25}, {11, 25});
}

TEST(HandWorked, FinalStateIsFilledEvenWhenTheSpecDoesNotAskForIt) {
  Spec spec = tinySpec(DecayKind::None, UpdateRule::Additive, 1, 1);
  spec.finalState = false;
  Problem p = emptyProblem(spec, 2);
  p.q = {1, 1};
  p.k = {1, 1};
  p.v = {1, 2};
  expectBothForms(p, {1, 3}, {3});
}

//===----------------------------------------------------------------------===//
// Preprocessing, checked on headInputs directly
//===----------------------------------------------------------------------===//

TEST(HeadInputs, L2NormThenDefaultScale) {
  // q = (3, 4) becomes (3, 4) / sqrt(25 + 1e-6), then times K^-1/2 = 2^-1/2;
  // k = (0, 2) becomes (0, 2 / sqrt(4 + 1e-6)) and is not scaled.
  Spec spec = tinySpec(DecayKind::None, UpdateRule::Additive, 2, 1);
  spec.scale.reset();
  spec.qkL2Norm = true;
  Problem p = emptyProblem(spec, 1);
  p.q = {3, 4};
  p.k = {0, 2};
  p.v = {1};
  HeadInputs in = headInputs(p, 0, 0);
  const double qNorm = std::sqrt(25 + 1e-6), kNorm = std::sqrt(4 + 1e-6);
  expectValues(in.q, {3 / qNorm / std::sqrt(2.0), 4 / qNorm / std::sqrt(2.0)},
               1e-16);
  expectValues(in.k, {0, 2 / kNorm}, 1e-16);
  // The epsilon is really there: without it k would be exactly (0, 1).
  EXPECT_LT(in.k[1], 1.0);
}

TEST(HeadInputs, GroupedHeadsShareQueryAndKeyHeads) {
  // H = 2, HV = 4: value heads 0, 1 read q/k head 0; 2, 3 read head 1.
  Spec spec = tinySpec(DecayKind::None, UpdateRule::Additive, 1, 1);
  spec.heads = 2;
  spec.valueHeads = 4;
  Problem p = emptyProblem(spec, 1);
  p.q = {10, 20};
  p.k = {1, 2};
  p.v = {5, 6, 7, 8};
  EXPECT_EQ(headInputs(p, 0, 1).q, std::vector<double>{10});
  EXPECT_EQ(headInputs(p, 0, 2).q, std::vector<double>{20});
  EXPECT_EQ(headInputs(p, 0, 3).k, std::vector<double>{2});
  EXPECT_EQ(headInputs(p, 0, 3).v, std::vector<double>{8});
}

TEST(HeadInputs, SoftplusGate) {
  // g = -exp(A_log) softplus(x + dt_bias).
  // A_log = log 3, dt_bias = -1:
  //   token 0: x + dt_bias = 0: -3 softplus(0) = -3 log 2.
  //   token 1: x + dt_bias = 1000: softplus = 1000, g = -3000 (a naive
  //            log(1 + e^x) gives inf).
  //   token 2: x + dt_bias = -1000: softplus = log1p(e^-1000) = 0, g = -0.
  Spec spec = tinySpec(DecayKind::Scalar, UpdateRule::Additive, 1, 1);
  spec.gate = GateSource::Softplus;
  Problem p = emptyProblem(spec, 3);
  p.q = p.k = p.v = {1, 1, 1};
  p.g = {1, 1001, -999};
  p.gateALog = {std::log(3.0)};
  p.gateDtBias = {-1};
  ASSERT_EQ(checkShapes(p), "");
  HeadInputs in = headInputs(p, 0, 0);
  EXPECT_NEAR(in.logD[0], -3 * std::log(2.0), 1e-15);
  EXPECT_NEAR(in.logD[1], -3000, 1e-9);
  EXPECT_EQ(in.logD[2], 0.0);
}

TEST(HeadInputs, LowerBoundGate) {
  // g = lb sigmoid(exp(A_log) (x + dt_bias)) with lb = -5, A_log = 0:
  //   x = 0 -> -2.5; x = 1000 -> -5; x = -1000 -> 0 (no overflow in e^-x).
  Spec spec = tinySpec(DecayKind::Scalar, UpdateRule::Additive, 1, 1);
  spec.gate = GateSource::LowerBound;
  spec.gateLowerBound = -5;
  Problem p = emptyProblem(spec, 3);
  p.q = p.k = p.v = {1, 1, 1};
  p.g = {0, 1000, -1000};
  p.gateALog = {0};
  HeadInputs in = headInputs(p, 0, 0);
  expectValues(in.logD, {-2.5, -5, 0}, 1e-15);
}

TEST(HeadInputs, PerChannelDtBiasIsIndexedByHeadAndChannel) {
  // HV = 2, K = 3, A_log = 0, x = (-7, 0, 0) for both heads, dt_bias [HV, K] =
  // (0, 0, 0 | 7, 0, 0). Head 1 adds 7 to channel 0 only: g = -softplus(0) =
  // -log 2 on every channel. Head 0 adds nothing: (-softplus(-7), -log 2,
  // -log 2).
  Spec spec = tinySpec(DecayKind::PerChannel, UpdateRule::Additive, 3, 1);
  spec.valueHeads = 2;
  spec.gate = GateSource::Softplus;
  Problem p = emptyProblem(spec, 1);
  p.q = p.k = {1, 1, 1};
  p.v = {1, 1};
  p.g = {-7, 0, 0, -7, 0, 0};
  p.gateALog = {0, 0};
  p.gateDtBias = {0, 0, 0, 7, 0, 0};
  ASSERT_EQ(checkShapes(p), "");
  const double log2 = std::log(2.0);
  expectValues(headInputs(p, 0, 1).logD, {-log2, -log2, -log2}, 1e-15);
  expectValues(headInputs(p, 0, 0).logD,
               {-std::log1p(std::exp(-7.0)), -log2, -log2}, 1e-15);
}

TEST(HeadInputs, BetaSourcesAndDeltaLowRankVectors) {
  // beta given 0.3, sigmoid(0) = 0.5, two_sigmoid(0) = 1. With k = (0.6, 0.8)
  // and D = Diag(0.5, 1): b = beta k, a = -(D k) = (-0.3, -0.8), w = beta.
  for (auto [source, x, beta] :
       {std::tuple{BetaSource::Given, 0.3, 0.3},
        std::tuple{BetaSource::Sigmoid, 0.0, 0.5},
        std::tuple{BetaSource::TwoSigmoid, 0.0, 1.0}}) {
    SCOPED_TRACE(toString(source));
    Spec spec = tinySpec(DecayKind::PerChannel, UpdateRule::Delta, 2, 1);
    spec.beta = source;
    Problem p = emptyProblem(spec, 1);
    p.q = {1, 0};
    p.k = {0.6, 0.8};
    p.v = {1};
    p.g = {std::log(0.5), 0};
    p.beta = {x};
    HeadInputs in = headInputs(p, 0, 0);
    expectValues(in.w, {beta}, 1e-16);
    expectValues(in.b, {beta * 0.6, beta * 0.8}, 1e-16);
    expectValues(in.a, {-0.3, -0.8}, 1e-16);
  }
}

} // namespace
