//===- TileGradMath.cpp - float64 tile kernels of the backward ---------===//
//
// Part of lina. The adjoints of TileMath.cpp's kernels that are not forward
// kernels themselves, written plainly. Loops run over the same valid rows as
// the forward kernel they differentiate, so padding rows stay out of them.
//
//===----------------------------------------------------------------------===//
#include "TileMath.h"

#include <cassert>
#include <cmath>

namespace lina::cpu {

Tile mul(const Tile &x, const Tile &y) {
  assert(x.rows == y.rows && x.cols == y.cols);
  Tile out = x;
  for (size_t i = 0; i < out.data.size(); ++i)
    out.data[i] *= y.data[i];
  return out;
}

Tile rowSum(const Tile &x) {
  Tile out(x.rows, 1);
  for (int64_t r = 0; r < x.rows; ++r)
    for (int64_t c = 0; c < x.cols; ++c)
      out.at(r, 0) += x.at(r, c);
  return out;
}

Tile colSum(const Tile &x) {
  Tile out(1, x.cols);
  for (int64_t r = 0; r < x.rows; ++r)
    for (int64_t c = 0; c < x.cols; ++c)
      out.at(0, c) += x.at(r, c);
  return out;
}

Tile straddleSum(const Tile &m, int64_t n) {
  Tile out(m.rows, 1);
  for (int64_t t = 0; t < n; ++t) {
    double s = 0;
    for (int64_t i = t; i < n; ++i)
      for (int64_t j = 0; j < t; ++j)
        s += m.at(i, j) - m.at(j, i);
    out.at(t, 0) = s;
  }
  return out;
}

Tile transpose(const Tile &x) {
  Tile out(x.cols, x.rows);
  for (int64_t r = 0; r < x.rows; ++r)
    for (int64_t c = 0; c < x.cols; ++c)
      out.at(c, r) = x.at(r, c);
  return out;
}

Tile addToLastRow(const Tile &x, const Tile &row, int64_t n) {
  Tile out = x;
  for (int64_t c = 0; c < x.cols; ++c)
    out.at(n - 1, c) += row.at(0, c);
  return out;
}

Tile decayProductGrad(bool lhsSide, const Tile &dp, const Tile &other,
                      const Tile &gx, const Tile &gy, int64_t n, bool strict) {
  Tile out(other.rows, other.cols);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < (strict ? i : i + 1); ++j) {
      double d = dp.at(i, j);
      if (d == 0)
        continue;
      // The forward's exponent for the pair (i, j), channel by channel.
      for (int64_t c = 0; c < other.cols; ++c) {
        double e = std::exp(gateAt(gx, i, c) - gateAt(gy, j, c));
        if (lhsSide)
          out.at(i, c) += d * other.at(j, c) * e;
        else
          out.at(j, c) += d * other.at(i, c) * e;
      }
    }
  return out;
}

Tile triSolveTransposed(const Tile &a, const Tile &x) {
  Tile y(x.rows, x.cols);
  for (int64_t i = x.rows - 1; i >= 0; --i)
    for (int64_t c = 0; c < x.cols; ++c) {
      double v = x.at(i, c);
      for (int64_t j = i + 1; j < x.rows; ++j)
        v -= a.at(j, i) * y.at(j, c);
      y.at(i, c) = v;
    }
  return y;
}

Tile strictLower(const Tile &x) {
  Tile out(x.rows, x.cols);
  for (int64_t r = 0; r < x.rows; ++r)
    for (int64_t c = 0; c < r && c < x.cols; ++c)
      out.at(r, c) = x.at(r, c);
  return out;
}

Tile l2normGrad(const Tile &x, const Tile &dy) {
  Tile out(x.rows, x.cols);
  for (int64_t r = 0; r < x.rows; ++r) {
    double sq = 0;
    for (int64_t c = 0; c < x.cols; ++c)
      sq += x.at(r, c) * x.at(r, c);
    // The forward's epsilon: y = x / norm with norm = sqrt(|x|^2 + 1e-6).
    double norm = std::sqrt(sq + 1e-6), yDotDy = 0;
    for (int64_t c = 0; c < x.cols; ++c)
      yDotDy += x.at(r, c) / norm * dy.at(r, c);
    for (int64_t c = 0; c < x.cols; ++c)
      out.at(r, c) = (dy.at(r, c) - x.at(r, c) / norm * yDotDy) / norm;
  }
  return out;
}

} // namespace lina::cpu
