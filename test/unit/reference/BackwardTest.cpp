//===- BackwardTest.cpp - Analytic gradients against finite differences ---===//
//
// Part of lina. runRecurrentBackward and finiteDifferenceGradients share
// nothing but the forward oracle, so agreement to 1e-7 on random problems of
// every preset and of specs that cover every field's values means the
// derivation has every term. The last tests make sure the comparison does
// fail where a gradient is wrong.
//
//===----------------------------------------------------------------------===//
#include "TestHelpers.h"

#include "lina/Reference/Backward.h"

#include <set>

using namespace lina;
using namespace lina::reference;
using namespace lina::reference::testing;

namespace {

/// Expects every analytic gradient of `p` within kBackwardTolerance of
/// finite differences, and each one non-zero (except those named in
/// `zeroAllowed`), so no comparison passes because both sides are 0.
void expectGradientsMatch(const Problem &p, const OutputGradients &d,
                          const std::set<std::string> &zeroAllowed = {}) {
  ASSERT_EQ(checkShapes(p), "");
  ASSERT_TRUE(isFinite(runRecurrent(p)));
  Gradients analytic = runRecurrentBackward(p, d.dO, d.dFinalState);
  Gradients numeric =
      finiteDifferenceGradients(p, d.dO, d.dFinalState, kFiniteDifferenceStep);
  std::vector<GradientError> errors = compareGradients(analytic, numeric);
  EXPECT_FALSE(errors.empty());
  for (const GradientError &e : errors)
    EXPECT_LE(e.error, kBackwardTolerance) << e.name;

  const std::pair<const char *, const std::vector<double> *> present[] = {
      {"dq", &numeric.dq},
      {"dk", &numeric.dk},
      {"dv", &numeric.dv},
      {"dg", &numeric.dg},
      {"dA_log", &numeric.dGateALog},
      {"ddt_bias", &numeric.dGateDtBias},
      {"dbeta", &numeric.dBeta},
      {"da", &numeric.da},
      {"db", &numeric.db},
      {"dh0", &numeric.dInitialState}};
  for (const auto &[name, values] : present)
    if (!values->empty() && !zeroAllowed.count(name)) {
      EXPECT_GT(norm(*values), 1e-6) << name << " is all zero";
    }
}

TEST(Backward, EveryPreset) {
  std::mt19937_64 rng(1);
  for (const Preset &preset : presets()) {
    SCOPED_TRACE(preset.name);
    Spec spec = smallPreset(preset.name);
    Problem p = randomProblem(spec, /*batch=*/2, /*seqLen=*/9, rng);
    expectGradientsMatch(p, randomOutputGradients(p, spec.finalState, rng));
  }
}

/// A spec with K != V (a transposed index shows), two q/k heads shared by
/// four value heads, and both states.
Spec baseSpec(DecayKind decay, UpdateRule update) {
  Spec s;
  s.name = "backward";
  s.decay = decay;
  s.update = update;
  s.keyDim = 5;
  s.valueDim = 4;
  s.heads = 2;
  s.valueHeads = 4;
  s.initialState = true;
  s.finalState = true;
  return s;
}

/// One spec the gradients are checked on, and what to draw for it.
struct Case {
  std::string name;
  Spec spec;
  /// With dt_bias when the gate is computed; false leaves it empty (zero).
  bool dtBias = true;
  std::vector<int64_t> cuSeqlens; ///< non-empty: varlen, B = 1
  bool dFinalState = true;        ///< draw a final-state gradient
  bool dO = true;                 ///< false: dO = 0, the loss is the state's
  /// Gradients that are zero by construction.
  std::set<std::string> zeroAllowed;
};

std::vector<Case> cases() {
  using D = DecayKind;
  using U = UpdateRule;
  std::vector<Case> all;
  auto add = [&](std::string name, Spec spec) -> Case & {
    spec.name = name;
    all.push_back({name, spec});
    return all.back();
  };

  // Decays and gate sources on the additive update.
  {
    Spec s = baseSpec(D::None, U::Additive);
    s.initialState = false;
    s.finalState = false;
    add("none_without_states", s).dFinalState = false;
  }
  add("fixed", baseSpec(D::FixedPerHead, U::Additive));
  add("scalar_given", baseSpec(D::Scalar, U::Additive));
  {
    Spec s = baseSpec(D::Scalar, U::Additive);
    s.gate = GateSource::Softplus;
    add("scalar_softplus", s);
    s.gate = GateSource::LowerBound;
    s.gateLowerBound = -3.0;
    add("scalar_lower_bound", s);
    add("scalar_lower_bound_without_dt_bias", s).dtBias = false;
  }
  {
    Spec s = baseSpec(D::PerChannel, U::Additive);
    add("per_channel_given", s);
    s.gate = GateSource::LowerBound;
    add("per_channel_lower_bound", s);
    s.gate = GateSource::Softplus;
    add("per_channel_softplus_without_dt_bias", s).dtBias = false;
    // One q/k head for four value heads, an explicit scale, q and k
    // normalised on an additive update.
    s.heads = 1;
    s.scale = 0.3;
    s.qkL2Norm = true;
    add("per_channel_softplus_group_of_four_scaled_l2norm", s);
  }

  // The delta rule: each beta source, keys normalised in the kernel or not.
  {
    Spec s = baseSpec(D::None, U::Delta);
    s.beta = BetaSource::Given;
    s.heads = s.valueHeads = 2; // no grouping
    add("delta_beta_given", s);
    s = baseSpec(D::Scalar, U::Delta);
    s.beta = BetaSource::Sigmoid;
    add("delta_scalar_beta_sigmoid", s);
    s.beta = BetaSource::TwoSigmoid;
    s.qkL2Norm = true;
    s.gate = GateSource::Softplus;
    add("delta_scalar_softplus_two_sigmoid_l2norm_without_dt_bias", s).dtBias =
        false;
    s = baseSpec(D::PerChannel, U::Delta);
    s.beta = BetaSource::Sigmoid;
    s.qkL2Norm = true;
    s.gate = GateSource::LowerBound;
    add("delta_per_channel_lower_bound_sigmoid_l2norm", s);
    s.gate = GateSource::Given;
    s.beta = BetaSource::Given;
    add("delta_per_channel_final_state_loss_only", s).dO = false;
    add("delta_per_channel_without_dfinal_state", s).dFinalState = false;
  }

  // dplr: every low-rank source in each position, both write weights.
  {
    Spec s = baseSpec(D::PerChannel, U::DPLR);
    s.write = WriteWeight::Beta;
    s.beta = BetaSource::Sigmoid;
    add("dplr_inputs_write_beta", s);
    s.lowRankA = LowRankSource::NegDecayedKey;
    s.lowRankB = LowRankSource::BetaKey;
    s.beta = BetaSource::Given;
    s.qkL2Norm = true;
    add("dplr_tied_like_delta_l2norm", s);
    s.lowRankA = LowRankSource::BetaKey;
    s.lowRankB = LowRankSource::NegDecayedKey;
    s.beta = BetaSource::TwoSigmoid;
    s.gate = GateSource::Softplus;
    s.write = WriteWeight::One;
    s.qkL2Norm = false;
    add("dplr_tied_swapped_softplus", s);
    s = baseSpec(D::Scalar, U::DPLR);
    s.lowRankA = LowRankSource::Zero;
    // b multiplies a^T S_{t-1} = 0: it cannot change the loss.
    add("dplr_a_zero_scalar", s).zeroAllowed = {"db"};
    s.lowRankA = LowRankSource::Input;
    s.lowRankB = LowRankSource::BetaKey;
    s.beta = BetaSource::Given;
    add("dplr_b_beta_key", s);
    s = baseSpec(D::FixedPerHead, U::DPLR);
    s.lowRankA = LowRankSource::NegDecayedKey;
    s.lowRankB = LowRankSource::Zero;
    add("dplr_b_zero_fixed", s);
  }

  // Packed sequences, one of them empty, from their own initial states or
  // from zero.
  {
    Spec s = baseSpec(D::Scalar, U::Delta);
    s.beta = BetaSource::Sigmoid;
    s.qkL2Norm = true;
    s.varlen = true;
    add("varlen_delta", s).cuSeqlens = {0, 4, 4, 9};
    s = baseSpec(D::PerChannel, U::DPLR);
    s.varlen = true;
    s.initialState = false;
    add("varlen_dplr_without_initial_state", s).cuSeqlens = {0, 2, 9};
  }
  return all;
}

TEST(Backward, EveryFieldValue) {
  std::mt19937_64 rng(2);
  for (const Case &c : cases()) {
    SCOPED_TRACE(c.name);
    ASSERT_TRUE(validate(c.spec).empty()) << validate(c.spec).front();
    const bool varlen = !c.cuSeqlens.empty();
    Problem p = randomProblem(c.spec, varlen ? 1 : 2, 9, rng, c.cuSeqlens);
    if (!c.dtBias)
      p.gateDtBias.clear();
    OutputGradients d = randomOutputGradients(p, c.dFinalState, rng);
    std::set<std::string> zeroAllowed = c.zeroAllowed;
    if (!c.dO) {
      std::fill(d.dO.begin(), d.dO.end(), 0.0);
      zeroAllowed.insert("dq"); // q reaches the loss only through o
    }
    expectGradientsMatch(p, d, zeroAllowed);
  }
}

/// A small gdn problem, for the tests that must fail.
Problem gdnProblem(std::mt19937_64 &rng) {
  Spec s = smallPreset("gdn");
  return randomProblem(s, 2, 9, rng);
}

/// The largest relative error of `analytic` against `numeric` over the
/// gradients named in `names`.
double worstError(const Gradients &analytic, const Gradients &numeric,
                  const std::set<std::string> &names) {
  double worst = 0;
  for (const GradientError &e : compareGradients(analytic, numeric))
    if (names.count(e.name))
      worst = std::max(worst, e.error);
  return worst;
}

TEST(BackwardCheckFails, WhenGradientsAreSwapped) {
  std::mt19937_64 rng(3);
  Problem p = gdnProblem(rng);
  OutputGradients d = randomOutputGradients(p, true, rng);
  Gradients analytic = runRecurrentBackward(p, d.dO, d.dFinalState);
  Gradients numeric =
      finiteDifferenceGradients(p, d.dO, d.dFinalState, kFiniteDifferenceStep);
  std::swap(analytic.dq, analytic.dk);
  EXPECT_GT(worstError(analytic, numeric, {"dq"}), 0.1);
  EXPECT_GT(worstError(analytic, numeric, {"dk"}), 0.1);
}

TEST(BackwardCheckFails, WhenOneElementIsSlightlyOff) {
  // The check resolves an error of 1e-5 of a gradient's norm in one element.
  std::mt19937_64 rng(4);
  Problem p = gdnProblem(rng);
  OutputGradients d = randomOutputGradients(p, true, rng);
  Gradients analytic = runRecurrentBackward(p, d.dO, d.dFinalState);
  Gradients numeric =
      finiteDifferenceGradients(p, d.dO, d.dFinalState, kFiniteDifferenceStep);
  ASSERT_LE(worstError(analytic, numeric, {"dg"}), kBackwardTolerance);
  analytic.dg[5] += 1e-5 * norm(analytic.dg);
  EXPECT_GT(worstError(analytic, numeric, {"dg"}), kBackwardTolerance);
}

TEST(BackwardCheckFails, WhenAnOutputIsLeftOut) {
  // Gradients that miss one token's output term, as an off-by-one in the
  // backward loop would.
  std::mt19937_64 rng(5);
  Problem p = gdnProblem(rng);
  OutputGradients d = randomOutputGradients(p, true, rng);
  std::vector<double> truncated = d.dO;
  const int64_t row = p.spec.valueHeads * p.spec.valueDim; // one token
  std::fill(truncated.begin(), truncated.begin() + row, 0.0);
  Gradients analytic = runRecurrentBackward(p, truncated, d.dFinalState);
  Gradients numeric =
      finiteDifferenceGradients(p, d.dO, d.dFinalState, kFiniteDifferenceStep);
  EXPECT_GT(worstError(analytic, numeric, {"dq", "dk", "dv", "dg", "dbeta"}),
            kBackwardTolerance);
}

TEST(BackwardCheckFails, WhenTiedTermsAreMissed) {
  // The delta rule's a = -(exp(g) . k) and b = beta k depend on k, g and
  // beta. A dplr problem given those same vectors as free inputs has the
  // same forward pass, but its dk, dg and dbeta lack the terms through a and
  // b: exactly what a derivation that forgot them would produce.
  std::mt19937_64 rng(6);
  Spec delta = baseSpec(DecayKind::PerChannel, UpdateRule::Delta);
  delta.beta = BetaSource::Given;
  Problem p = randomProblem(delta, 2, 9, rng);

  Spec untied = delta;
  untied.update = UpdateRule::DPLR;
  untied.write = WriteWeight::Beta;
  Problem q = p;
  q.spec = untied;
  const int64_t HV = delta.valueHeads, H = delta.heads, K = delta.keyDim;
  q.a.assign(p.batch * p.seqLen * HV * K, 0.0);
  q.b = q.a;
  for (int64_t token = 0; token < p.batch * p.seqLen; ++token)
    for (int64_t hv = 0; hv < HV; ++hv)
      for (int64_t c = 0; c < K; ++c) {
        const double k = p.k[(token * H + hv / (HV / H)) * K + c];
        const double g = p.g[(token * HV + hv) * K + c];
        q.a[(token * HV + hv) * K + c] = -std::exp(g) * k;
        q.b[(token * HV + hv) * K + c] = p.beta[token * HV + hv] * k;
      }
  ASSERT_EQ(checkShapes(q), "");
  ASSERT_LE(relativeError(runRecurrent(q).o, runRecurrent(p).o), 1e-14);

  OutputGradients d = randomOutputGradients(p, true, rng);
  Gradients analytic = runRecurrentBackward(q, d.dO, d.dFinalState);
  Gradients numeric =
      finiteDifferenceGradients(p, d.dO, d.dFinalState, kFiniteDifferenceStep);
  for (const char *name : {"dk", "dg", "dbeta"}) {
    SCOPED_TRACE(name);
    EXPECT_GT(worstError(analytic, numeric, {name}), kBackwardTolerance);
  }
  // The gradients that do not pass through a and b still agree.
  EXPECT_LE(worstError(analytic, numeric, {"dq", "dv", "dh0"}),
            kBackwardTolerance);
}

TEST(Backward, CountsInputElements) {
  std::mt19937_64 rng(7);
  Problem p = gdnProblem(rng);
  // q, k: 2*9*2*8; v: 2*9*4*6; g, beta: 2*9*4; h0: 2*4*8*6.
  EXPECT_EQ(countInputElements(p), 2 * 288 + 432 + 2 * 72 + 384);
}

} // namespace
