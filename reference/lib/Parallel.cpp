//===- Parallel.cpp - The T x T (parallel) form ---------------------------===//
//
// Part of lina. The same recurrence as runRecurrent, computed without stepping
// the state: every output is a sum over earlier tokens weighted by decay
// ratios, and the low-rank (delta / dplr) term is handled the way the chunkwise
// algorithm handles it inside one chunk, through the WY representation, with
// the whole sequence as a single chunk. Because it shares no loop with the
// recurrent form, agreement between the two checks both.
//
// Notation (one sequence, one value head, tokens i = 0 .. L-1):
//   cum[i]  = sum_{s < i} logD_s     (so cum[0] = 0, cum[L] = the total)
//   u_i     = a_i^T S_{i-1}          (a row vector of length V)
// Unrolling S_i = D_i S_{i-1} + b_i u_i + w_i k_i v_i^T from S_{-1} = S0:
//   S_i = e^{cum[i+1]} . S0 + sum_{j <= i} e^{cum[i+1] - cum[j+1]} .
//                                          (b_j u_j + w_j k_j v_j^T)
// where e^{x} . M scales row c of M by e^{x_c}. Taking a_i^T of S_{i-1} and
// q_i^T of S_i gives the formulas below.
//
// Decay factors are always exponentials of differences cum[x] - cum[y] with
// x >= y, never e^{cum} and e^{-cum} separately: with gates near -20 per step
// the cumulative sums reach -2000 and e^{+2000} would overflow.
//
//===----------------------------------------------------------------------===//
#include "lina/Reference/Reference.h"

#include "HeadLoop.h"

#include <cmath>

namespace lina::reference {

namespace {
/// Per-head quantities of the parallel form.
class ParallelHead {
public:
  explicit ParallelHead(const HeadInputs &in)
      : in(in), L(in.len), K(in.keyDim), V(in.valueDim), cum((L + 1) * K, 0.0) {
    for (int64_t i = 0; i < L; ++i)
      for (int64_t c = 0; c < K; ++c)
        cum[(i + 1) * K + c] = cum[i * K + c] + in.logD[i * K + c];
  }

  /// sum_c x_c y_c e^{cum[to][c] - cum[from][c]}: a dot product of a key-side
  /// vector read at prefix `to` with one written at prefix `from`.
  double decayedDot(const double *x, const double *y, int64_t to,
                    int64_t from) const {
    double sum = 0;
    for (int64_t c = 0; c < K; ++c)
      sum += x[c] * y[c] * std::exp(cum[to * K + c] - cum[from * K + c]);
    return sum;
  }

  /// out = (e^{cum[prefix]} . x)^T S0, a row of length V (S0 is [K, V]).
  void readInitial(const double *x, int64_t prefix,
                   const std::vector<double> &S0, double *out) const {
    for (int64_t j = 0; j < V; ++j) {
      out[j] = 0;
      for (int64_t c = 0; c < K; ++c)
        out[j] += x[c] * std::exp(cum[prefix * K + c]) * S0[c * V + j];
    }
  }

  /// U = [u_0; ...; u_{L-1}], u_i = a_i^T S_{i-1}, as the solution of
  ///   (I - L_ab) U = A~ S0 + L_ak V
  /// with, for j < i (both strictly lower triangular),
  ///   L_ab[i][j] = sum_c a_ic b_jc e^{cum[i] - cum[j+1]}
  ///   L_ak[i][j] = w_j sum_c a_ic k_jc e^{cum[i] - cum[j+1]}
  ///   A~_i       = e^{cum[i]} . a_i
  /// I - L_ab is unit lower triangular, so forward substitution solves it.
  std::vector<double> solveU(const std::vector<double> &S0) const {
    std::vector<double> Lab(L * L, 0.0), Lak(L * L, 0.0);
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j < i; ++j) {
        const double *a = &in.a[i * K];
        Lab[i * L + j] = decayedDot(a, &in.b[j * K], i, j + 1);
        Lak[i * L + j] = in.w[j] * decayedDot(a, &in.k[j * K], i, j + 1);
      }

    std::vector<double> U(L * V, 0.0);
    for (int64_t i = 0; i < L; ++i) {
      double *u = &U[i * V];
      // Right-hand side: A~_i S0 + sum_j L_ak[i][j] v_j.
      readInitial(&in.a[i * K], i, S0, u);
      for (int64_t j = 0; j < i; ++j)
        for (int64_t x = 0; x < V; ++x)
          u[x] += Lak[i * L + j] * in.v[j * V + x];
      // Forward substitution: rows j < i of U are final already.
      for (int64_t j = 0; j < i; ++j)
        for (int64_t x = 0; x < V; ++x)
          u[x] += Lab[i * L + j] * U[j * V + x];
    }
    return U;
  }

  /// o_i = (e^{cum[i+1]} . q_i)^T S0
  ///     + sum_{j <= i} [sum_c q_ic b_jc e^{cum[i+1] - cum[j+1]}] u_j
  ///                  + w_j [sum_c q_ic k_jc e^{cum[i+1] - cum[j+1]}] v_j.
  /// The j <= i mask is the causal mask of attention; j == i is included
  /// because the output reads the state after the update.
  void outputs(const std::vector<double> &S0, const std::vector<double> &U,
               std::vector<double> &o) const {
    for (int64_t i = 0; i < L; ++i) {
      const double *q = &in.q[i * K];
      double *out = &o[i * V];
      readInitial(q, i + 1, S0, out);
      for (int64_t j = 0; j <= i; ++j) {
        const double qb = decayedDot(q, &in.b[j * K], i + 1, j + 1);
        const double qk = in.w[j] * decayedDot(q, &in.k[j * K], i + 1, j + 1);
        for (int64_t x = 0; x < V; ++x)
          out[x] += qb * U[j * V + x] + qk * in.v[j * V + x];
      }
    }
  }

  /// S_T = e^{cum[L]} . S0 + sum_j e^{cum[L] - cum[j+1]} . (b_j u_j +
  /// w_j k_j v_j^T).
  std::vector<double> finalState(const std::vector<double> &S0,
                                 const std::vector<double> &U) const {
    std::vector<double> S(K * V);
    for (int64_t c = 0; c < K; ++c) {
      const double total = cum[L * K + c];
      for (int64_t x = 0; x < V; ++x) {
        double sum = std::exp(total) * S0[c * V + x];
        for (int64_t j = 0; j < L; ++j)
          sum += std::exp(total - cum[(j + 1) * K + c]) *
                 (in.b[j * K + c] * U[j * V + x] +
                  in.w[j] * in.k[j * K + c] * in.v[j * V + x]);
        S[c * V + x] = sum;
      }
    }
    return S;
  }

private:
  const HeadInputs &in;
  const int64_t L, K, V;
  std::vector<double> cum; ///< [L + 1, K]: cum[i] = sum_{s < i} logD_s
};
} // namespace

/// For the additive update a = b = 0, so U = 0 and the formulas reduce to
/// O = (e^{cum} . Q) S0 + (M . A) V, A_ij = sum_c q_ic k_jc e^{G_ic - G_jc}.
static void parallelHead(const HeadInputs &in, std::vector<double> &state,
                         std::vector<double> &o) {
  ParallelHead head(in);
  const std::vector<double> S0 = state;
  std::vector<double> U = head.solveU(S0);
  head.outputs(S0, U, o);
  state = head.finalState(S0, U);
}

Result runParallel(const Problem &p) {
  return detail::forEachHead(p, "runParallel", parallelHead);
}

} // namespace lina::reference
