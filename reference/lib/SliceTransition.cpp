//===- SliceTransition.cpp - A stretch of tokens as an affine map --------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Reference/SliceTransition.h"
#include "lina/Reference/Reference.h"

#include <cassert>

namespace lina::reference {

namespace {

/// Tokens [t0, t1) of each of `batch` rows of a [B, T, ...] tensor.
std::vector<double> tokens(const std::vector<double> &x, int64_t batch,
                           int64_t seqLen, int64_t t0, int64_t t1) {
  if (x.empty() || seqLen == 0)
    return {};
  const size_t perToken = x.size() / static_cast<size_t>(batch * seqLen);
  std::vector<double> out;
  out.reserve(static_cast<size_t>(batch * (t1 - t0)) * perToken);
  for (int64_t b = 0; b < batch; ++b)
    out.insert(out.end(), x.begin() + (b * seqLen + t0) * perToken,
               x.begin() + (b * seqLen + t1) * perToken);
  return out;
}

} // namespace

Problem sliceOf(const Problem &p, int64_t t0, int64_t t1,
                std::vector<double> initial) {
  assert(!p.spec.varlen && 0 <= t0 && t0 <= t1 && t1 <= p.seqLen);
  const int64_t B = p.batch, T = p.seqLen;
  Problem s = p;
  s.seqLen = t1 - t0;
  for (auto [from, to] : {std::pair{&p.q, &s.q}, std::pair{&p.k, &s.k},
                          std::pair{&p.v, &s.v}, std::pair{&p.beta, &s.beta},
                          std::pair{&p.a, &s.a}, std::pair{&p.b, &s.b}})
    *to = tokens(*from, B, T, t0, t1);
  // A fixed decay is one log gate per value head, not per token.
  if (p.spec.decay != DecayKind::FixedPerHead)
    s.g = tokens(p.g, B, T, t0, t1);
  s.spec.initialState = !initial.empty();
  s.initialState = std::move(initial);
  return s;
}

std::vector<double> sliceTransition(const Problem &p) {
  const int64_t N = p.numSequences(), HV = p.spec.valueHeads,
                K = p.spec.keyDim;
  Problem t = p;
  t.spec.valueDim = K;
  t.v.assign(static_cast<size_t>(p.batch * p.seqLen * HV * K), 0.0);
  t.spec.initialState = true;
  t.initialState.assign(static_cast<size_t>(N * HV * K * K), 0.0);
  for (int64_t h = 0; h < N * HV; ++h)
    for (int64_t i = 0; i < K; ++i)
      t.initialState[(h * K + i) * K + i] = 1.0;
  return runRecurrent(t).finalState;
}

std::vector<double> sliceContribution(const Problem &p) {
  Problem c = p;
  c.spec.initialState = false;
  c.initialState.clear();
  return runRecurrent(c).finalState;
}

std::vector<double> applySlice(const std::vector<double> &transition,
                               const std::vector<double> &state,
                               const std::vector<double> &contribution,
                               int64_t keyDim, int64_t valueDim) {
  const int64_t K = keyDim, V = valueDim;
  const int64_t heads = static_cast<int64_t>(state.size()) / (K * V);
  std::vector<double> out = contribution;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < K; ++i)
      for (int64_t j = 0; j < K; ++j) {
        double t = transition[(h * K + i) * K + j];
        for (int64_t c = 0; c < V; ++c)
          out[(h * K + i) * V + c] += t * state[(h * K + j) * V + c];
      }
  return out;
}

} // namespace lina::reference
