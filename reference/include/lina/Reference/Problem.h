//===- Problem.h - One forward problem in float64 ---------------*- C++ -*-===//
//
// Part of lina. The inputs and outputs of one forward call, held in float64
// row-major [B, T, heads, dim] buffers. The reference, the chunkwise executor
// and the GPU checks all read and write this one layout.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_REFERENCE_PROBLEM_H
#define LINA_REFERENCE_PROBLEM_H

#include "lina/Spec/Spec.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace lina::reference {

/// Tensor shapes (H = spec.heads, HV = spec.valueHeads, K = keyDim, V = valueDim):
///   q, k            [B, T, H, K]
///   v               [B, T, HV, V]
///   g               decay scalar:      [B, T, HV]       (log gate or its pre-activation)
///                   decay per_channel: [B, T, HV, K]
///                   decay fixed:       [HV]             (log gamma per value head)
///                   decay none:        empty
///   gateALog        [HV]                    (gate = softplus | lower_bound)
///   gateDtBias      [HV] or [HV * K]         (as g: scalar or per channel)
///   beta            [B, T, HV]              (delta rule; beta or its logit)
///   a, b            [B, T, HV, K]           (dplr)
///   initialState    [N, HV, K, V]  N = B, or number of sequences when varlen
///   cuSeqlens       [N + 1], B == 1, cuSeqlens[0] = 0, cuSeqlens[N] = T
/// Outputs:
///   o               [B, T, HV, V]
///   finalState      [N, HV, K, V]
struct Problem {
  Spec spec;
  int64_t batch = 1;
  int64_t seqLen = 0;
  std::vector<double> q, k, v, g, gateALog, gateDtBias, beta, a, b;
  std::vector<double> initialState;
  std::vector<int64_t> cuSeqlens;

  /// Number of independent sequences: B, or cuSeqlens.size() - 1.
  int64_t numSequences() const;
};

struct Result {
  std::vector<double> o;
  std::vector<double> finalState; ///< filled even when spec.finalState is off
};

/// Whether every output and final-state value is finite: false where the
/// recurrence diverged (an overflow of the float64 reference itself).
bool isFinite(const Result &r);

/// Checks every buffer size and cuSeqlens against the spec; returns the first
/// problem found as a message naming the tensor, or "" when consistent.
std::string checkShapes(const Problem &p);

/// Fills a problem with random inputs the way fla's benchmarks draw them:
/// q, k, v ~ N(0,1); log gates logsigmoid(N(0,1)) (per channel clamped at -5
/// like fla's gla benchmark); beta sigmoid(N(0,1)) (or its logit); dplr
/// a = normalize(uniform), b = -a * sigmoid(N(0,1)); initial state N(0,1) when
/// the spec has one. Sequence lengths come from `cuSeqlens` when non-empty.
Problem randomProblem(const Spec &spec, int64_t batch, int64_t seqLen,
                      std::mt19937_64 &rng,
                      std::vector<int64_t> cuSeqlens = {});

/// ||x - y|| / ||y||; NaN or Inf anywhere in x gives +infinity, size mismatch too.
double relativeError(const std::vector<double> &x, const std::vector<double> &y);

} // namespace lina::reference

#endif // LINA_REFERENCE_PROBLEM_H
