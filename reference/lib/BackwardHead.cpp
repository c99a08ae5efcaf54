//===- BackwardHead.cpp - The backward recurrence of one head -------------===//
//
// Part of lina. With M_t = D_t + b_t a_t^T and G_t = dL/dS_t (everything that
// reaches the loss through S_t: its output o_t and the states after it),
//
//   G_t     = q_t do_t^T + M_{t+1}^T G_{t+1},    G_T = dFinalState + q_T do_T^T
//   dq_t    = S_t do_t
//   dv_t    = w_t G_t^T k_t,   dk_t = w_t G_t v_t,   dw_t = k_t^T G_t v_t
//   dM_t    = G_t S_{t-1}^T:   db_t = dM_t a_t,  da_t = dM_t^T b_t,
//                              dlogD_t = exp(logD_t) . diag(dM_t)
//   dS_0    = M_1^T G_1
//
// Never forms dM_t (K x K): each of its uses is a matrix-vector product
// through G_t and S_{t-1}, which keeps a step O(K V).
//
//===----------------------------------------------------------------------===//
#include "BackwardHead.h"

#include <algorithm>
#include <cmath>

namespace lina::reference::detail {

/// Every state S_0 .. S_len of the head, [len + 1, K, V]: the forward
/// recurrence of Reference.cpp, keeping what the backward pass reads.
static std::vector<double> forwardStates(const HeadInputs &in,
                                         const std::vector<double> &initial) {
  const int64_t K = in.keyDim, V = in.valueDim, KV = K * V;
  std::vector<double> states((in.len + 1) * KV);
  std::copy(initial.begin(), initial.end(), states.begin());
  std::vector<double> u(V);
  for (int64_t t = 0; t < in.len; ++t) {
    const double *prev = &states[t * KV];
    double *next = &states[(t + 1) * KV];
    const double *k = &in.k[t * K], *v = &in.v[t * V];
    const double *logD = &in.logD[t * K], *a = &in.a[t * K], *b = &in.b[t * K];
    for (int64_t j = 0; j < V; ++j) {
      u[j] = 0;
      for (int64_t c = 0; c < K; ++c)
        u[j] += a[c] * prev[c * V + j];
    }
    for (int64_t c = 0; c < K; ++c) {
      const double decay = std::exp(logD[c]);
      for (int64_t j = 0; j < V; ++j)
        next[c * V + j] =
            decay * prev[c * V + j] + b[c] * u[j] + in.w[t] * k[c] * v[j];
    }
  }
  return states;
}

HeadGradients backwardHead(const HeadInputs &in,
                           const std::vector<double> &initialState,
                           const std::vector<double> &dO,
                           const std::vector<double> &dFinalState) {
  const int64_t K = in.keyDim, V = in.valueDim, KV = K * V;
  const std::vector<double> states = forwardStates(in, initialState);

  HeadGradients d;
  d.q.assign(in.len * K, 0.0);
  d.k.assign(in.len * K, 0.0);
  d.v.assign(in.len * V, 0.0);
  d.logD.assign(in.len * K, 0.0);
  d.a.assign(in.len * K, 0.0);
  d.b.assign(in.len * K, 0.0);
  d.w.assign(in.len, 0.0);

  // G holds G_t while token t is processed; it starts as dL/dS_T.
  std::vector<double> G = dFinalState;
  std::vector<double> u(V), r(V);
  for (int64_t t = in.len - 1; t >= 0; --t) {
    const double *prev = &states[t * KV], *cur = &states[(t + 1) * KV];
    const double *q = &in.q[t * K], *k = &in.k[t * K], *v = &in.v[t * V];
    const double *logD = &in.logD[t * K], *a = &in.a[t * K], *b = &in.b[t * K];
    const double *dOt = &dO[t * V];
    const double w = in.w[t];

    // o_t = S_t^T q_t: S_t reaches the loss through o_t too.
    for (int64_t c = 0; c < K; ++c)
      for (int64_t j = 0; j < V; ++j)
        G[c * V + j] += q[c] * dOt[j];

    for (int64_t c = 0; c < K; ++c) {
      double sq = 0;
      for (int64_t j = 0; j < V; ++j)
        sq += cur[c * V + j] * dOt[j];
      d.q[t * K + c] = sq;
    }
    // The write w k v^T.
    double dw = 0;
    for (int64_t c = 0; c < K; ++c) {
      double gv = 0;
      for (int64_t j = 0; j < V; ++j)
        gv += G[c * V + j] * v[j];
      d.k[t * K + c] = w * gv;
      dw += k[c] * gv;
    }
    d.w[t] = dw;
    for (int64_t j = 0; j < V; ++j) {
      double gk = 0;
      for (int64_t c = 0; c < K; ++c)
        gk += G[c * V + j] * k[c];
      d.v[t * V + j] = w * gk;
    }
    // The transition, through dM_t = G_t S_{t-1}^T: u = S_{t-1}^T a_t (the
    // low-rank read of the forward pass), r = G_t^T b_t.
    for (int64_t j = 0; j < V; ++j) {
      u[j] = r[j] = 0;
      for (int64_t c = 0; c < K; ++c) {
        u[j] += a[c] * prev[c * V + j];
        r[j] += b[c] * G[c * V + j];
      }
    }
    for (int64_t c = 0; c < K; ++c) {
      double diag = 0, db = 0, da = 0;
      for (int64_t j = 0; j < V; ++j) {
        diag += G[c * V + j] * prev[c * V + j];
        db += G[c * V + j] * u[j];
        da += prev[c * V + j] * r[j];
      }
      d.logD[t * K + c] = std::exp(logD[c]) * diag;
      d.b[t * K + c] = db;
      d.a[t * K + c] = da;
    }
    // G_{t-1} (without its own output term) = M_t^T G_t = D_t G_t + a_t r^T.
    for (int64_t c = 0; c < K; ++c) {
      const double decay = std::exp(logD[c]);
      for (int64_t j = 0; j < V; ++j)
        G[c * V + j] = decay * G[c * V + j] + a[c] * r[j];
    }
  }
  d.initialState = std::move(G);
  return d;
}

} // namespace lina::reference::detail
