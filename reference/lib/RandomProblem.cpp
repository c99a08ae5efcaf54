//===- RandomProblem.cpp - Random inputs drawn like fla's benchmarks ------===//
//
// Part of lina. Tests and the autotuner's correctness check need inputs with
// realistic magnitudes: log gates in the range real models produce, beta in
// (0, 1), a DPLR transition that does not blow up. The distributions follow
// fla's benchmark registry (see Problem.h). Keys are drawn unit-norm where the
// transition reads them and the spec does not normalise them in the kernel
// (a delta rule without qk_l2norm): I - beta k k^T with ||k||^2 ~ K would
// expand the state K-fold a token, and the reference itself would overflow.
//
// Only `rng` is used, so a seed reproduces a problem on one standard library
// (the <random> distributions themselves differ between libraries).
//
//===----------------------------------------------------------------------===//
#include "lina/Reference/Activations.h"
#include "lina/Reference/Problem.h"

#include <algorithm>
#include <cmath>

namespace lina::reference {

namespace {
/// The draws randomProblem makes, each tied to the one generator.
class Draw {
public:
  explicit Draw(std::mt19937_64 &rng) : rng(rng) {}

  double normal(double stddev = 1.0) {
    return std::normal_distribution<double>(0.0, stddev)(rng);
  }
  double uniform(double low, double high) {
    return std::uniform_real_distribution<double>(low, high)(rng);
  }
  std::vector<double> normals(int64_t count, double stddev = 1.0) {
    std::vector<double> values(count);
    for (double &x : values)
      x = normal(stddev);
    return values;
  }

private:
  std::mt19937_64 &rng;
};
} // namespace

/// log(sigmoid(x)) = -softplus(-x): no overflow and no log(0) for any x.
static double logSigmoid(double x) { return -softplus(-x); }

/// The log gates or their pre-activations, and A_log and dt_bias for computed
/// gates.
static void drawGates(Problem &p, Draw &draw, int64_t tokens) {
  const Spec &s = p.spec;
  const int64_t HV = s.valueHeads;
  switch (s.decay) {
  case DecayKind::None:
    return;
  case DecayKind::FixedPerHead:
    // RetNet's gamma_h = 1 - 2^(-5 - h), as log1p(-2^(-5 - h)) so it stays
    // accurate near 1. The exponent is capped at -37: a head past that would
    // hardly decay at all (and past h ~ 1069 2^(-5 - h) underflows to 0),
    // which tests would not tell apart from no decay.
    p.g.resize(HV);
    for (int64_t hv = 0; hv < HV; ++hv)
      p.g[hv] = std::log1p(
          -std::ldexp(1.0, -5 - static_cast<int>(std::min<int64_t>(hv, 32))));
    return;
  case DecayKind::Scalar:
  case DecayKind::PerChannel:
    break;
  }

  const int64_t width = s.gateWidth(); // 1 or K values per (token, head)
  if (s.gate != GateSource::Given) {
    // The gate is computed in the kernel: draw what a model would feed it.
    p.g = draw.normals(tokens * HV * width);
    p.gateALog.resize(HV);
    for (double &aLog : p.gateALog)
      aLog = std::log(draw.uniform(1.0, 16.0));
    p.gateDtBias = draw.normals(HV * width, /*stddev=*/0.1);
    return;
  }
  // fla: logsigmoid(randn); per-channel gates also clamped at -5, as its gla
  // benchmark does.
  p.g.resize(tokens * HV * width);
  for (double &g : p.g) {
    g = logSigmoid(draw.normal());
    if (s.decay == DecayKind::PerChannel)
      g = std::max(g, -5.0);
  }
}

/// Whether k enters the transition D + b a^T, so its norm decides whether
/// the recurrence contracts.
static bool transitionReadsKeys(const Spec &s) {
  auto tiedToKey = [](LowRankSource source) {
    return source == LowRankSource::BetaKey ||
           source == LowRankSource::NegDecayedKey;
  };
  return s.update == UpdateRule::Delta ||
         (s.update == UpdateRule::DPLR &&
          (tiedToKey(s.lowRankA) || tiedToKey(s.lowRankB)));
}

/// Scales \p row to unit L2 norm as torch's F.normalize does (dividing by
/// max(norm, 1e-12)).
static void normalize(double *row, int64_t length) {
  double sumSquares = 0;
  for (int64_t c = 0; c < length; ++c)
    sumSquares += row[c] * row[c];
  double norm = std::max(std::sqrt(sumSquares), 1e-12);
  for (int64_t c = 0; c < length; ++c)
    row[c] /= norm;
}

/// dplr: a = normalize(uniform[0, 1)^K), b = -a * sigmoid(N(0,1)). Then
/// D + b a^T = D - s a a^T with |a| = 1, 0 < s < 1: a contraction.
static void drawLowRank(Problem &p, Draw &draw, int64_t tokens) {
  const int64_t HV = p.spec.valueHeads, K = p.spec.keyDim;
  p.a.resize(tokens * HV * K);
  p.b.resize(tokens * HV * K);
  for (int64_t row = 0; row < tokens * HV; ++row) {
    double *a = &p.a[row * K], *b = &p.b[row * K];
    for (int64_t c = 0; c < K; ++c)
      a[c] = draw.uniform(0.0, 1.0);
    normalize(a, K);
    double strength = sigmoid(draw.normal());
    for (int64_t c = 0; c < K; ++c)
      b[c] = -a[c] * strength;
  }
}

Problem randomProblem(const Spec &spec, int64_t batch, int64_t seqLen,
                      std::mt19937_64 &rng, std::vector<int64_t> cuSeqlens) {
  Problem p;
  p.spec = spec;
  p.batch = batch;
  p.seqLen = seqLen;
  // A varlen problem without explicit boundaries is one sequence. Boundaries
  // given to a non-varlen spec are kept, for checkShapes to report.
  if (spec.varlen && cuSeqlens.empty())
    cuSeqlens = {0, seqLen};
  p.cuSeqlens = std::move(cuSeqlens);

  // Negative sizes are checkShapes' to report; draw nothing for them.
  const int64_t tokens =
      std::max<int64_t>(batch, 0) * std::max<int64_t>(seqLen, 0);
  const int64_t H = spec.heads, HV = spec.valueHeads, K = spec.keyDim,
                V = spec.valueDim;
  Draw draw(rng);
  p.q = draw.normals(tokens * H * K);
  p.k = draw.normals(tokens * H * K);
  if (!spec.qkL2Norm && transitionReadsKeys(spec) && K > 0)
    for (size_t row = 0; row < p.k.size(); row += K)
      normalize(&p.k[row], K);
  p.v = draw.normals(tokens * HV * V);
  drawGates(p, draw, tokens);

  switch (spec.beta) {
  case BetaSource::None:
    break;
  case BetaSource::Given:
    p.beta.resize(tokens * HV);
    for (double &beta : p.beta)
      beta = sigmoid(draw.normal());
    break;
  case BetaSource::Sigmoid:
  case BetaSource::TwoSigmoid:
    p.beta = draw.normals(tokens * HV); // the logit; the kernel applies it
    break;
  }
  if (spec.update == UpdateRule::DPLR) {
    drawLowRank(p, draw, tokens);
    // Vectors tied to k or zero are not inputs.
    if (spec.lowRankA != LowRankSource::Input)
      p.a.clear();
    if (spec.lowRankB != LowRankSource::Input)
      p.b.clear();
  }
  if (spec.initialState)
    p.initialState =
        draw.normals(std::max<int64_t>(p.numSequences(), 0) * HV * K * V);
  return p;
}

} // namespace lina::reference
