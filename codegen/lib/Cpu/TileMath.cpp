//===- TileMath.cpp - float64 tile kernels of the CPU backend ----------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "TileMath.h"

#include <cassert>
#include <cmath>

namespace lina::cpu {

Tile l2norm(const Tile &x) {
  Tile out(x.rows, x.cols);
  for (int64_t r = 0; r < x.rows; ++r) {
    double sq = 0;
    for (int64_t c = 0; c < x.cols; ++c)
      sq += x.at(r, c) * x.at(r, c);
    // Same epsilon as fla's l2norm; a zero (padding) row stays zero.
    double inv = 1.0 / std::sqrt(sq + 1e-6);
    for (int64_t c = 0; c < x.cols; ++c)
      out.at(r, c) = x.at(r, c) * inv;
  }
  return out;
}

template <typename F> static Tile map(const Tile &x, F f) {
  Tile out(x.rows, x.cols);
  for (size_t i = 0; i < x.data.size(); ++i)
    out.data[i] = f(x.data[i]);
  return out;
}

Tile scale(const Tile &x, double factor) {
  return map(x, [&](double v) { return v * factor; });
}
Tile neg(const Tile &x) {
  return map(x, [](double v) { return -v; });
}

Tile add(const Tile &x, const Tile &y) {
  assert(x.rows == y.rows && x.cols == y.cols);
  Tile out = x;
  for (size_t i = 0; i < out.data.size(); ++i)
    out.data[i] += y.data[i];
  return out;
}

Tile sub(const Tile &x, const Tile &y) {
  assert(x.rows == y.rows && x.cols == y.cols);
  Tile out = x;
  for (size_t i = 0; i < out.data.size(); ++i)
    out.data[i] -= y.data[i];
  return out;
}

Tile cumsum(const Tile &x, int64_t n, bool exclusive, bool reverse) {
  Tile out(x.rows, x.cols);
  for (int64_t c = 0; c < x.cols; ++c) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      int64_t r = reverse ? n - 1 - i : i;
      if (exclusive)
        out.at(r, c) = sum;
      sum += x.at(r, c);
      if (!exclusive)
        out.at(r, c) = sum;
    }
  }
  return out;
}

Tile scaleRows(const Tile &x, const Tile &w) {
  Tile out(x.rows, x.cols);
  for (int64_t r = 0; r < x.rows; ++r)
    for (int64_t c = 0; c < x.cols; ++c)
      out.at(r, c) = x.at(r, c) * w.at(r, 0);
  return out;
}

Tile decayRows(const Tile &x, const Tile &g, int64_t n, bool toEnd) {
  Tile out(x.rows, x.cols);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < x.cols; ++c) {
      double e = toEnd ? gateAt(g, n - 1, c) - gateAt(g, r, c) : gateAt(g, r, c);
      out.at(r, c) = x.at(r, c) * std::exp(e);
    }
  return out;
}

Tile decayState(const Tile &s, const Tile &g, int64_t n) {
  Tile out(s.rows, s.cols);
  for (int64_t r = 0; r < s.rows; ++r) {
    double f = std::exp(gateAt(g, n - 1, r));
    for (int64_t c = 0; c < s.cols; ++c)
      out.at(r, c) = s.at(r, c) * f;
  }
  return out;
}

Tile decayProduct(const Tile &x, const Tile &y, const Tile &gx,
                  const Tile &gy, int64_t n, bool strict) {
  Tile out(x.rows, x.rows);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < (strict ? i : i + 1); ++j) {
      double sum = 0;
      // Exponents are differences of gates inside one chunk, <= 0 for the
      // kept j <= i: no overflow however strong the decay.
      for (int64_t c = 0; c < x.cols; ++c)
        sum += x.at(i, c) * y.at(j, c) *
               std::exp(gateAt(gx, i, c) - gateAt(gy, j, c));
      out.at(i, j) = sum;
    }
  return out;
}

Tile triSolve(const Tile &a, const Tile &x) {
  Tile y(x.rows, x.cols);
  for (int64_t i = 0; i < x.rows; ++i)
    for (int64_t c = 0; c < x.cols; ++c) {
      double v = x.at(i, c);
      for (int64_t j = 0; j < i; ++j)
        v -= a.at(i, j) * y.at(j, c);
      y.at(i, c) = v;
    }
  return y;
}

Tile matmul(const Tile &a, const Tile &b, bool transposeA) {
  int64_t m = transposeA ? a.cols : a.rows;
  int64_t k = transposeA ? a.rows : a.cols;
  Tile out(m, b.cols);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p) {
      double av = transposeA ? a.at(p, i) : a.at(i, p);
      for (int64_t j = 0; j < b.cols; ++j)
        out.at(i, j) += av * b.at(p, j);
    }
  return out;
}

} // namespace lina::cpu
