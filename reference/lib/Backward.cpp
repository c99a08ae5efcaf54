//===- Backward.cpp - Gradients of the recurrence in float64 --------------===//
//
// Part of lina. backwardHead differentiates one (sequence, value head) with
// respect to what the recurrence reads (HeadInputs); this file takes those
// gradients back through everything headInputs derives from the problem's
// tensors: the vectors a delta rule or a tied dplr vector builds from k,
// beta and the gate; beta's activation; the computed gate; the scale and
// L2 normalisation of q and k; and the value heads that share a q/k head.
//
//===----------------------------------------------------------------------===//
#include "lina/Reference/Backward.h"
#include "lina/Reference/Activations.h"
#include "lina/Reference/Reference.h"

#include "lina/Reference/ActivationGradients.h"
#include "BackwardHead.h"
#include "HeadLoop.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace lina::reference {

namespace {

/// Reference.cpp's l2Normalize divides by sqrt(sum x^2 + this).
constexpr double kL2NormEpsilon = 1e-6;

[[noreturn]] void fail(const std::string &message) {
  std::fprintf(stderr, "lina::reference::runRecurrentBackward: %s\n",
               message.c_str());
  std::abort();
}

/// Gradients of zeros shaped like p's inputs.
Gradients zerosLike(const Problem &p) {
  auto zeros = [](const std::vector<double> &x) {
    return std::vector<double>(x.size(), 0.0);
  };
  Gradients grad;
  grad.dq = zeros(p.q);
  grad.dk = zeros(p.k);
  grad.dv = zeros(p.v);
  grad.dg = zeros(p.g);
  grad.dGateALog = zeros(p.gateALog);
  grad.dGateDtBias = zeros(p.gateDtBias);
  grad.dBeta = zeros(p.beta);
  grad.da = zeros(p.a);
  grad.db = zeros(p.b);
  grad.dInitialState = zeros(p.initialState);
  return grad;
}

/// Chains one (sequence, value head)'s HeadGradients into the problem's
/// gradients. q and k go to `dqRead` and `dkRead`, the gradients of the
/// vectors the recurrence reads ([B, T, H, K]), summed over the value heads
/// of a group; chainQueryKey takes them the rest of the way.
class HeadChain {
public:
  HeadChain(const Problem &p, int64_t hv, detail::SequenceTokens tokens,
            const HeadInputs &in, Gradients &grad, std::vector<double> &dqRead,
            std::vector<double> &dkRead)
      : p(p), s(p.spec), hv(hv), tokens(tokens), in(in), grad(grad),
        dqRead(dqRead), dkRead(dkRead) {}

  void run(detail::HeadGradients &d) {
    for (int64_t i = 0; i < in.len; ++i)
      token(d, i);
  }

private:
  const Problem &p;
  const Spec &s;
  const int64_t hv;
  const detail::SequenceTokens tokens;
  const HeadInputs &in;
  Gradients &grad;
  std::vector<double> &dqRead, &dkRead;

  /// Token `i` of the head; its dk and dlogD rows in `d` pick up the terms
  /// of vectors tied to them before they are passed on.
  void token(detail::HeadGradients &d, int64_t i) {
    const int64_t H = s.heads, HV = s.valueHeads, K = s.keyDim, V = s.valueDim;
    const int64_t h = hv / (HV / H);
    // Index of this token in the flattened [B, T] grid of every input.
    const int64_t token = tokens.batchIndex * p.seqLen + tokens.begin + i;
    double *dk = &d.k[i * K], *dLogD = &d.logD[i * K];
    const double *k = &in.k[i * K], *logD = &in.logD[i * K];
    const double *da = &d.a[i * K], *db = &d.b[i * K];
    const bool hasBeta = s.beta != BetaSource::None;
    const double betaInput = hasBeta ? p.beta[token * HV + hv] : 0.0;
    const double beta = hasBeta ? betaFromInput(s.beta, betaInput) : 0.0;
    double dBeta = 0;

    // a or b: a free input, or built from beta, k and the gate.
    auto lowRank = [&](LowRankSource source, const double *dx,
                       std::vector<double> &input) {
      for (int64_t c = 0; c < K; ++c) {
        const double decay = std::exp(logD[c]);
        switch (source) {
        case LowRankSource::Input:
          input[(token * HV + hv) * K + c] += dx[c];
          break;
        case LowRankSource::Zero:
          break;
        case LowRankSource::BetaKey: // x = beta k
          dBeta += dx[c] * k[c];
          dk[c] += beta * dx[c];
          break;
        case LowRankSource::NegDecayedKey: // x = -(exp(logD) . k)
          dk[c] -= decay * dx[c];
          dLogD[c] -= decay * k[c] * dx[c];
          break;
        }
      }
    };
    switch (s.update) {
    case UpdateRule::Additive:
      if (s.write == WriteWeight::Beta)
        dBeta += d.w[i];
      break;
    case UpdateRule::Delta:
      // b = beta k, a = -(D k), w = beta; neither vector is an input.
      dBeta += d.w[i];
      lowRank(LowRankSource::BetaKey, db, grad.db);
      lowRank(LowRankSource::NegDecayedKey, da, grad.da);
      break;
    case UpdateRule::DPLR:
      if (s.write == WriteWeight::Beta)
        dBeta += d.w[i];
      lowRank(s.lowRankA, da, grad.da);
      lowRank(s.lowRankB, db, grad.db);
      break;
    }

    for (int64_t c = 0; c < K; ++c) {
      dqRead[(token * H + h) * K + c] += d.q[i * K + c];
      dkRead[(token * H + h) * K + c] += dk[c];
    }
    for (int64_t j = 0; j < V; ++j)
      grad.dv[(token * HV + hv) * V + j] += d.v[i * V + j];
    if (hasBeta)
      grad.dBeta[token * HV + hv] +=
          dBeta * betaDerivative(s.beta, betaInput);
    gate(token, dLogD);
  }

  /// The log gate's gradient `dLogD` (one value a channel) to g, A_log and
  /// dt_bias.
  void gate(int64_t token, const double *dLogD) {
    const int64_t HV = s.valueHeads, K = s.keyDim;
    double sum = 0;
    for (int64_t c = 0; c < K; ++c)
      sum += dLogD[c];
    switch (s.decay) {
    case DecayKind::None:
      return;
    case DecayKind::FixedPerHead:
      // One log gamma per value head, read by every channel of every token.
      grad.dg[hv] += sum;
      return;
    case DecayKind::Scalar:
      // One gate a token, broadcast over the channels.
      computedGate(token * HV + hv, hv, sum);
      return;
    case DecayKind::PerChannel:
      for (int64_t c = 0; c < K; ++c)
        computedGate((token * HV + hv) * K + c, hv * K + c, dLogD[c]);
      return;
    }
  }

  /// dL/dlogD = `dLogD` for the gate read from g[gIndex] (and, for a
  /// computed gate, dt_bias[biasIndex] and A_log[hv]).
  void computedGate(int64_t gIndex, int64_t biasIndex, double dLogD) {
    if (s.gate == GateSource::Given) {
      grad.dg[gIndex] += dLogD;
      return;
    }
    const bool hasBias = !p.gateDtBias.empty();
    const double x = p.g[gIndex] + (hasBias ? p.gateDtBias[biasIndex] : 0.0);
    LogGateDerivatives derivative =
        logGateDerivatives(s.gate, s.gateLowerBound, p.gateALog[hv], x);
    grad.dg[gIndex] += dLogD * derivative.dx;
    if (hasBias)
      grad.dGateDtBias[biasIndex] += dLogD * derivative.dx;
    grad.dGateALog[hv] += dLogD * derivative.dALog;
  }
};

/// The gradient of x / sqrt(|x|^2 + eps) with respect to x, given `dy`, that
/// of the normalised row: (dy - y (y . dy)) / sqrt(|x|^2 + eps).
void l2NormalizeBackward(const double *x, const double *dy, double *dx,
                         int64_t n) {
  double sumSquares = 0;
  for (int64_t i = 0; i < n; ++i)
    sumSquares += x[i] * x[i];
  const double inverseNorm = 1.0 / std::sqrt(sumSquares + kL2NormEpsilon);
  double yDotDy = 0;
  for (int64_t i = 0; i < n; ++i)
    yDotDy += x[i] * inverseNorm * dy[i];
  for (int64_t i = 0; i < n; ++i)
    dx[i] = (dy[i] - x[i] * inverseNorm * yDotDy) * inverseNorm;
}

/// dq and dk from the gradients of the vectors the recurrence reads: q read
/// is scale times q (normalised when the spec asks), k read is k
/// (normalised likewise).
void chainQueryKey(const Problem &p, std::vector<double> &dqRead,
                   const std::vector<double> &dkRead, Gradients &grad) {
  const Spec &s = p.spec;
  const int64_t K = s.keyDim;
  const double scale = s.effectiveScale();
  for (double &x : dqRead)
    x *= scale;
  if (!s.qkL2Norm) {
    grad.dq = dqRead;
    grad.dk = dkRead;
    return;
  }
  for (size_t row = 0; row < p.q.size(); row += K) {
    l2NormalizeBackward(&p.q[row], &dqRead[row], &grad.dq[row], K);
    l2NormalizeBackward(&p.k[row], &dkRead[row], &grad.dk[row], K);
  }
}

/// Aborts unless p, dO and dFinalState are consistent.
void checkArguments(const Problem &p, const std::vector<double> &dO,
                    const std::vector<double> &dFinalState) {
  if (std::string error = checkShapes(p); !error.empty())
    fail(error);
  const Spec &s = p.spec;
  const size_t outputs = p.batch * p.seqLen * s.valueHeads * s.valueDim;
  if (dO.size() != outputs)
    fail("'dO' has " + std::to_string(dO.size()) +
         " values, expected o's shape [B, T, HV, V] (" +
         std::to_string(outputs) + " values)");
  const size_t states = p.numSequences() * s.valueHeads * s.keyDim * s.valueDim;
  if (!dFinalState.empty() && !s.finalState)
    fail("'dFinalState' must be empty when the spec has no final state");
  if (!dFinalState.empty() && dFinalState.size() != states)
    fail("'dFinalState' has " + std::to_string(dFinalState.size()) +
         " values, expected [N, HV, K, V] (" + std::to_string(states) +
         " values) or none");
}

} // namespace

Gradients runRecurrentBackward(const Problem &p, const std::vector<double> &dO,
                               const std::vector<double> &dFinalState) {
  checkArguments(p, dO, dFinalState);
  const Spec &s = p.spec;
  const int64_t T = p.seqLen, HV = s.valueHeads, K = s.keyDim, V = s.valueDim,
                KV = K * V;
  Gradients grad = zerosLike(p);
  std::vector<double> dqRead(p.q.size(), 0.0), dkRead(p.k.size(), 0.0);

  for (int64_t seq = 0; seq < p.numSequences(); ++seq) {
    detail::SequenceTokens tokens = detail::sequenceTokens(p, seq);
    for (int64_t hv = 0; hv < HV; ++hv) {
      HeadInputs in = headInputs(p, seq, hv);
      const int64_t stateOffset = (seq * HV + hv) * KV;
      std::vector<double> initial(KV, 0.0), dFinal(KV, 0.0);
      if (s.initialState)
        initial.assign(p.initialState.begin() + stateOffset,
                       p.initialState.begin() + stateOffset + KV);
      if (!dFinalState.empty())
        dFinal.assign(dFinalState.begin() + stateOffset,
                      dFinalState.begin() + stateOffset + KV);
      std::vector<double> headDO(in.len * V);
      for (int64_t i = 0; i < in.len; ++i) {
        const int64_t token = tokens.batchIndex * T + tokens.begin + i;
        for (int64_t j = 0; j < V; ++j)
          headDO[i * V + j] = dO[(token * HV + hv) * V + j];
      }

      detail::HeadGradients d =
          detail::backwardHead(in, initial, headDO, dFinal);
      HeadChain(p, hv, tokens, in, grad, dqRead, dkRead).run(d);
      if (s.initialState)
        std::copy(d.initialState.begin(), d.initialState.end(),
                  grad.dInitialState.begin() + stateOffset);
    }
  }
  chainQueryKey(p, dqRead, dkRead, grad);
  return grad;
}

OutputGradients randomOutputGradients(const Problem &p, bool withFinalState,
                                      std::mt19937_64 &rng) {
  const Spec &s = p.spec;
  auto normals = [&](int64_t count) {
    std::normal_distribution<double> normal;
    std::vector<double> values(count);
    for (double &x : values)
      x = normal(rng);
    return values;
  };
  OutputGradients d;
  d.dO = normals(p.batch * p.seqLen * s.valueHeads * s.valueDim);
  if (withFinalState)
    d.dFinalState =
        normals(p.numSequences() * s.valueHeads * s.keyDim * s.valueDim);
  return d;
}

} // namespace lina::reference
