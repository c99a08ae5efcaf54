//===- SliceTransition.h - A stretch of tokens as an affine map -*- C++ -*-===//
//
// Part of lina. The recurrence S_t = (D_t + b_t a_t^T) S_{t-1} + w_t k_t v_t^T
// is linear in (v, initial state) jointly, so a stretch of tokens maps its
// starting state S to T S + C for every form: T (K x K per sequence and value
// head) is the product of the stretch's transitions, C its final state from
// zero. Both come from the spec's own recurrence, not from per-form algebra:
// T is the final state from the identity with v = 0 (a value dimension of K),
// C the final state from zero. Splitting a sequence into stretches that run
// apart and combining their (T, C) in order is what running it across
// several devices needs (context parallelism); the float64 forms here are
// that scheme's reference.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_REFERENCE_SLICETRANSITION_H
#define LINA_REFERENCE_SLICETRANSITION_H

#include "lina/Reference/Problem.h"

namespace lina::reference {

/// Tokens [t0, t1) of every sequence of a batched problem (not varlen), as
/// a problem of its own starting from `initial` ([B, HV, K, V], or empty for
/// zero). Per-head inputs (a fixed decay, A_log, dt_bias) are kept whole.
Problem sliceOf(const Problem &p, int64_t t0, int64_t t1,
                std::vector<double> initial);

/// T per sequence and value head, [N, HV, K, K]: final state = T S0 + C.
std::vector<double> sliceTransition(const Problem &p);

/// C per sequence and value head, [N, HV, K, V]: the final state from zero.
std::vector<double> sliceContribution(const Problem &p);

/// T S + C for each sequence and value head (T [N, HV, K, K], S and C
/// [N, HV, K, V]): the state after a stretch that started from S.
std::vector<double> applySlice(const std::vector<double> &transition,
                               const std::vector<double> &state,
                               const std::vector<double> &contribution,
                               int64_t keyDim, int64_t valueDim);

} // namespace lina::reference

#endif // LINA_REFERENCE_SLICETRANSITION_H
