//===- Reference.h - The float64 oracle -------------------------*- C++ -*-===//
//
// Part of lina. The recurrence exactly as docs/design.md states it, token by
// token, in float64. Every other path (chunkwise executor, GPU kernels) is
// checked against this. Written for clarity, not speed.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_REFERENCE_REFERENCE_H
#define LINA_REFERENCE_REFERENCE_H

#include "lina/Reference/Problem.h"

namespace lina::reference {

/// The preprocessed per-token quantities of one (sequence, value head): what
/// the recurrence consumes after in-kernel gate/beta/L2-norm/scale are applied.
/// Rows are tokens. Shared by the recurrent and parallel forms and by tests.
struct HeadInputs {
  int64_t len = 0, keyDim = 0, valueDim = 0;
  std::vector<double> q;    ///< [len, K], L2-normalised if asked, times scale
  std::vector<double> k;    ///< [len, K], L2-normalised if asked
  std::vector<double> v;    ///< [len, V]
  std::vector<double> logD; ///< [len, K]: log of the diagonal of D_t (0 if none)
  std::vector<double> a, b; ///< [len, K]: the low-rank vectors (zero if none)
  std::vector<double> w;    ///< [len]: the write weight (beta, or 1)
};

/// Preprocessed inputs for sequence `seq`, value head `hv`.
HeadInputs headInputs(const Problem &p, int64_t seq, int64_t hv);

/// The recurrent form: S_t = (D_t + b_t a_t^T) S_{t-1} + w_t k_t v_t^T,
/// o_t = S_t^T q_t. Requires checkShapes(p) to be "".
Result runRecurrent(const Problem &p);

/// The parallel (T x T) form, for every decay and update rule: o = (mask .
/// (Q K^T with decay ratios)) V + decayed initial state contribution, plus,
/// for delta and dplr, the low-rank term through the WY representation over
/// the whole sequence (one triangular solve). Used to cross-check the
/// recurrent form. Requires checkShapes(p) to be "".
Result runParallel(const Problem &p);

} // namespace lina::reference

#endif // LINA_REFERENCE_REFERENCE_H
