//===- TileMath.h - float64 tile kernels of the CPU backend -----*- C++ -*-===//
//
// Part of lina. One function per tile op, written plainly: the CPU twin of the
// CUDA device library. `n` is the number of valid rows of a chunk tile.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_CODEGEN_CPU_TILEMATH_H
#define LINA_CODEGEN_CPU_TILEMATH_H

#include <cstdint>
#include <vector>

namespace lina::cpu {

struct Tile {
  int64_t rows = 0, cols = 0;
  std::vector<double> data;

  Tile() = default;
  Tile(int64_t rows, int64_t cols)
      : rows(rows), cols(cols), data(rows * cols, 0.0) {}
  double &at(int64_t r, int64_t c) { return data[r * cols + c]; }
  double at(int64_t r, int64_t c) const { return data[r * cols + c]; }
};

/// Gate value for row r, channel c: one column broadcasts.
inline double gateAt(const Tile &g, int64_t r, int64_t c) {
  return g.cols == 1 ? g.at(r, 0) : g.at(r, c);
}

Tile l2norm(const Tile &x);
Tile scale(const Tile &x, double factor);
Tile neg(const Tile &x);
Tile add(const Tile &x, const Tile &y);
Tile sub(const Tile &x, const Tile &y);
/// Inclusive (or exclusive) cumulative sum over the first n rows, down the
/// rows or, with `reverse`, up from row n - 1 (lina.cumsum's adjoint); the
/// other rows zero.
Tile cumsum(const Tile &x, int64_t n, bool exclusive, bool reverse = false);
Tile scaleRows(const Tile &x, const Tile &w);
/// x_i . exp(G_i), or x_i . exp(G_{n-1} - G_i) with toEnd.
Tile decayRows(const Tile &x, const Tile &g, int64_t n, bool toEnd);
/// Row c of the state times exp(G_{n-1,c}).
Tile decayState(const Tile &s, const Tile &g, int64_t n);
/// P_ij = sum_c x_ic y_jc exp(gx_ic - gy_jc) for j <= i (or j < i), i < n.
Tile decayProduct(const Tile &x, const Tile &y, const Tile &gx,
                  const Tile &gy, int64_t n, bool strict);
/// (I + A)^-1 X by forward substitution, A strictly lower triangular.
Tile triSolve(const Tile &a, const Tile &x);
Tile matmul(const Tile &a, const Tile &b, bool transposeA);

// The backward's tile ops (TileGradMath.cpp).
Tile mul(const Tile &x, const Tile &y);
Tile rowSum(const Tile &x);
Tile colSum(const Tile &x);
Tile transpose(const Tile &x);
/// y_t = sum_{i >= t > j} M_ij - sum_{j >= t > i} M_ij over the first n
/// rows and columns (lina.straddle_sum); the other rows zero.
Tile straddleSum(const Tile &m, int64_t n);
/// x with `row` added to row n - 1.
Tile addToLastRow(const Tile &x, const Tile &row, int64_t n);
/// The gradient of decayProduct's lhs (`lhsSide`) or rhs from dP, given the
/// other factor.
Tile decayProductGrad(bool lhsSide, const Tile &dp, const Tile &other,
                      const Tile &gx, const Tile &gy, int64_t n, bool strict);
/// (I + A)^-T X by back substitution, A strictly lower triangular.
Tile triSolveTransposed(const Tile &a, const Tile &x);
Tile strictLower(const Tile &x);
/// The gradient through l2norm(x) given dy.
Tile l2normGrad(const Tile &x, const Tile &dy);

} // namespace lina::cpu

#endif // LINA_CODEGEN_CPU_TILEMATH_H
