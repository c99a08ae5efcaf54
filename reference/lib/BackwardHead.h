//===- BackwardHead.h - The backward recurrence of one head -----*- C++ -*-===//
//
// Part of lina. Private to reference/lib. The gradients of one (sequence,
// value head) with respect to the per-token quantities the recurrence reads
// (HeadInputs); Backward.cpp chains them back to the problem's inputs.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_REFERENCE_LIB_BACKWARDHEAD_H
#define LINA_REFERENCE_LIB_BACKWARDHEAD_H

#include "lina/Reference/Reference.h"

#include <vector>

namespace lina::reference::detail {

/// dL with respect to each vector of HeadInputs, same layouts, plus the
/// initial state's [K, V]. logD is the gradient of the log of D_t's diagonal
/// (a scalar or fixed gate sums it over the channels).
struct HeadGradients {
  std::vector<double> q, k, v, logD, a, b, w, initialState;
};

/// Runs S_t = (D_t + b_t a_t^T) S_{t-1} + w_t k_t v_t^T, o_t = S_t^T q_t
/// forward from `initialState` ([K, V] row-major), keeping every state, then
/// backwards with G_t = dL/dS_t from G_T = `dFinalState` (+ q_T do_T^T).
/// `dO` is [len, V]: dL/do_t, the head's rows of the output gradient.
HeadGradients backwardHead(const HeadInputs &in,
                           const std::vector<double> &initialState,
                           const std::vector<double> &dO,
                           const std::vector<double> &dFinalState);

} // namespace lina::reference::detail

#endif // LINA_REFERENCE_LIB_BACKWARDHEAD_H
