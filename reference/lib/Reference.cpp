//===- Reference.cpp - Preprocessing and the recurrent form ---------------===//
//
// Part of lina. headInputs turns a problem's raw tensors into the per-token
// vectors of the generic recurrence (design section 1)
//
//   S_t = (D_t + b_t a_t^T) S_{t-1} + w_t k_t v_t^T,   o_t = S_t^T q_t
//
// and runRecurrent steps that recurrence one token at a time. Everything is
// float64 and written the way the math reads, because every faster path is
// judged against it.
//
//===----------------------------------------------------------------------===//
#include "lina/Reference/Reference.h"
#include "lina/Reference/Activations.h"

#include "HeadLoop.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace lina::reference {

//===----------------------------------------------------------------------===//
// Gate and beta activations
//===----------------------------------------------------------------------===//

/// The log gate of value head `hv` at flattened token `token` (an index into
/// the [B, T] grid), key channel `c`: g's raw input run through the gate
/// source. Zero when there is no decay.
static double logGate(const Problem &p, int64_t token, int64_t hv, int64_t c) {
  const Spec &s = p.spec;
  const int64_t HV = s.valueHeads, K = s.keyDim;
  double x = 0, dtBias = 0;
  switch (s.decay) {
  case DecayKind::None:
    return 0;
  case DecayKind::FixedPerHead:
    return p.g[hv]; // always given (validate() forbids a computed fixed gate)
  case DecayKind::Scalar:
    x = p.g[token * HV + hv];
    if (!p.gateDtBias.empty())
      dtBias = p.gateDtBias[hv];
    break;
  case DecayKind::PerChannel:
    x = p.g[(token * HV + hv) * K + c];
    if (!p.gateDtBias.empty())
      dtBias = p.gateDtBias[hv * K + c];
    break;
  }
  if (s.gate == GateSource::Given)
    return x;
  return computedLogGate(s.gate, s.gateLowerBound, p.gateALog[hv], x + dtBias);
}

/// beta of value head `hv` at flattened token `token` (delta rule only).
static double betaValue(const Problem &p, int64_t token, int64_t hv) {
  return betaFromInput(p.spec.beta, p.beta[token * p.spec.valueHeads + hv]);
}

/// Divides `row[0..n)` by sqrt(sum x^2 + 1e-6), fla's l2norm with its epsilon:
/// results match fla's, and a zero row stays zero instead of becoming NaN.
static void l2Normalize(double *row, int64_t n) {
  double sumSquares = 0;
  for (int64_t i = 0; i < n; ++i)
    sumSquares += row[i] * row[i];
  double inverseNorm = 1.0 / std::sqrt(sumSquares + 1e-6);
  for (int64_t i = 0; i < n; ++i)
    row[i] *= inverseNorm;
}

//===----------------------------------------------------------------------===//
// Gathering one head
//===----------------------------------------------------------------------===//

namespace detail {
SequenceTokens sequenceTokens(const Problem &p, int64_t seq) {
  if (p.spec.varlen)
    return {0, p.cuSeqlens[seq], p.cuSeqlens[seq + 1]};
  return {seq, 0, p.seqLen};
}
} // namespace detail

HeadInputs headInputs(const Problem &p, int64_t seq, int64_t hv) {
  const Spec &s = p.spec;
  const int64_t H = s.heads, HV = s.valueHeads, K = s.keyDim, V = s.valueDim;
  // Grouped value heads: HV / H consecutive value heads share one q/k head.
  const int64_t h = hv / (HV / H);
  const double scale = s.effectiveScale();
  detail::SequenceTokens tokens = detail::sequenceTokens(p, seq);

  HeadInputs in;
  in.len = tokens.end - tokens.begin;
  in.keyDim = K;
  in.valueDim = V;
  in.q.assign(in.len * K, 0.0);
  in.k.assign(in.len * K, 0.0);
  in.v.assign(in.len * V, 0.0);
  in.logD.assign(in.len * K, 0.0);
  in.a.assign(in.len * K, 0.0);
  in.b.assign(in.len * K, 0.0);
  in.w.assign(in.len, 1.0);

  for (int64_t i = 0; i < in.len; ++i) {
    // Index of this token in the flattened [B, T] grid of every input.
    const int64_t token = tokens.batchIndex * p.seqLen + tokens.begin + i;
    double *q = &in.q[i * K], *k = &in.k[i * K], *logD = &in.logD[i * K];
    for (int64_t c = 0; c < K; ++c) {
      q[c] = p.q[(token * H + h) * K + c];
      k[c] = p.k[(token * H + h) * K + c];
      logD[c] = logGate(p, token, hv, c);
    }
    if (s.qkL2Norm) {
      l2Normalize(q, K);
      l2Normalize(k, K);
    }
    // The scale applies after normalisation, as in fla.
    for (int64_t c = 0; c < K; ++c)
      q[c] *= scale;
    for (int64_t j = 0; j < V; ++j)
      in.v[i * V + j] = p.v[(token * HV + hv) * V + j];

    double *a = &in.a[i * K], *b = &in.b[i * K];
    switch (s.update) {
    case UpdateRule::Additive:
      // a = b = 0; w = beta with a weighted write, else 1.
      if (s.write == WriteWeight::Beta)
        in.w[i] = betaValue(p, token, hv);
      break;
    case UpdateRule::Delta: {
      // b a^T = -beta k (e^g . k)^T, so D + b a^T = (I - beta k k^T) D: the
      // old value stored under k is read after this step's decay and erased.
      const double beta = betaValue(p, token, hv);
      in.w[i] = beta;
      for (int64_t c = 0; c < K; ++c) {
        b[c] = beta * k[c];
        a[c] = -std::exp(logD[c]) * k[c];
      }
      break;
    }
    case UpdateRule::DPLR: {
      // Each vector is a free input, zero, or tied to k (the forms that
      // lina-specialize turns into cheaper ones).
      const bool hasBeta = s.beta != BetaSource::None;
      const double beta = hasBeta ? betaValue(p, token, hv) : 0.0;
      if (s.write == WriteWeight::Beta)
        in.w[i] = beta;
      auto lowRank = [&](LowRankSource source, const std::vector<double> &input,
                         int64_t c) {
        switch (source) {
        case LowRankSource::Input:
          return input[(token * HV + hv) * K + c];
        case LowRankSource::Zero:
          return 0.0;
        case LowRankSource::BetaKey:
          return beta * k[c];
        case LowRankSource::NegDecayedKey:
          return -std::exp(logD[c]) * k[c];
        }
        return 0.0;
      };
      for (int64_t c = 0; c < K; ++c) {
        a[c] = lowRank(s.lowRankA, p.a, c);
        b[c] = lowRank(s.lowRankB, p.b, c);
      }
      break;
    }
    }
  }
  return in;
}

//===----------------------------------------------------------------------===//
// Running every head
//===----------------------------------------------------------------------===//

namespace detail {
Result forEachHead(const Problem &p, const char *caller, HeadSolver solve) {
  // The oracle must never quietly compute on out-of-range memory; a caller
  // that skipped checkShapes gets its message and a stop.
  if (std::string error = checkShapes(p); !error.empty()) {
    std::fprintf(stderr, "lina::reference::%s: %s\n", caller, error.c_str());
    std::abort();
  }
  const Spec &s = p.spec;
  const int64_t T = p.seqLen, HV = s.valueHeads, K = s.keyDim, V = s.valueDim,
                N = p.numSequences();
  Result result;
  result.o.assign(p.batch * T * HV * V, 0.0);
  result.finalState.assign(N * HV * K * V, 0.0);

  for (int64_t seq = 0; seq < N; ++seq) {
    SequenceTokens tokens = sequenceTokens(p, seq);
    for (int64_t hv = 0; hv < HV; ++hv) {
      HeadInputs in = headInputs(p, seq, hv);
      const int64_t stateOffset = (seq * HV + hv) * K * V;
      std::vector<double> state(K * V, 0.0);
      if (s.initialState)
        state.assign(p.initialState.begin() + stateOffset,
                     p.initialState.begin() + stateOffset + K * V);
      std::vector<double> o(in.len * V, 0.0);
      solve(in, state, o);

      for (int64_t i = 0; i < in.len; ++i) {
        const int64_t token = tokens.batchIndex * T + tokens.begin + i;
        for (int64_t j = 0; j < V; ++j)
          result.o[(token * HV + hv) * V + j] = o[i * V + j];
      }
      std::copy(state.begin(), state.end(),
                result.finalState.begin() + stateOffset);
    }
  }
  return result;
}
} // namespace detail

//===----------------------------------------------------------------------===//
// The recurrent form
//===----------------------------------------------------------------------===//

/// Steps S_t = D_t S_{t-1} + b_t (a_t^T S_{t-1}) + w_t k_t v_t^T token by
/// token; `state` is [K, V] row-major, S[c][j] = state[c * V + j].
static void recurrentHead(const HeadInputs &in, std::vector<double> &state,
                          std::vector<double> &o) {
  const int64_t K = in.keyDim, V = in.valueDim;
  std::vector<double> u(V);
  for (int64_t t = 0; t < in.len; ++t) {
    const double *q = &in.q[t * K], *k = &in.k[t * K], *v = &in.v[t * V];
    const double *logD = &in.logD[t * K], *a = &in.a[t * K], *b = &in.b[t * K];
    const double w = in.w[t];
    // u = a_t^T S_{t-1}: the low-rank term reads the state before this
    // step changes it.
    for (int64_t j = 0; j < V; ++j) {
      u[j] = 0;
      for (int64_t c = 0; c < K; ++c)
        u[j] += a[c] * state[c * V + j];
    }
    for (int64_t c = 0; c < K; ++c) {
      const double decay = std::exp(logD[c]);
      for (int64_t j = 0; j < V; ++j)
        state[c * V + j] =
            decay * state[c * V + j] + b[c] * u[j] + w * k[c] * v[j];
    }
    // o_t = S_t^T q_t: the output reads the state after the update.
    for (int64_t j = 0; j < V; ++j) {
      double sum = 0;
      for (int64_t c = 0; c < K; ++c)
        sum += state[c * V + j] * q[c];
      o[t * V + j] = sum;
    }
  }
}

Result runRecurrent(const Problem &p) {
  return detail::forEachHead(p, "runRecurrent", recurrentHead);
}

} // namespace lina::reference
