//===- Activations.cpp - Gate and beta activations in float64 ----------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Reference/Activations.h"

#include <algorithm>
#include <cmath>

namespace lina::reference {

double softplus(double x) {
  return std::max(x, 0.0) + std::log1p(std::exp(-std::abs(x)));
}

double sigmoid(double x) {
  if (x >= 0)
    return 1.0 / (1.0 + std::exp(-x));
  double e = std::exp(x);
  return e / (1.0 + e);
}

double computedLogGate(GateSource source, double lowerBound, double aLog,
                       double x) {
  switch (source) {
  case GateSource::Given:
    return x;
  case GateSource::Softplus:
    // GDN / KDA: g = -exp(A_log) * softplus(x + dt_bias).
    return -std::exp(aLog) * softplus(x);
  case GateSource::LowerBound:
    // g = lb * sigmoid(exp(A_log) * (x + dt_bias)), confined to (lb, 0).
    return lowerBound * sigmoid(std::exp(aLog) * x);
  }
  return x;
}

double betaFromInput(BetaSource source, double x) {
  switch (source) {
  case BetaSource::None:
  case BetaSource::Given:
    return x;
  case BetaSource::Sigmoid:
    return sigmoid(x);
  case BetaSource::TwoSigmoid:
    // Range (0, 2): lets I - beta k k^T have a negative eigenvalue.
    return 2 * sigmoid(x);
  }
  return x;
}

} // namespace lina::reference
