//===- ActivationGradients.cpp - Derivatives of the activations ----------===//
//
// Part of lina. Written from the same helpers as the activations themselves
// (softplus' derivative is sigmoid), so they stay finite wherever those are.
//
//===----------------------------------------------------------------------===//
#include "lina/Reference/ActivationGradients.h"

#include "lina/Reference/Activations.h"

#include <cmath>

namespace lina::reference {

/// sigmoid'(x) = sigmoid(x) (1 - sigmoid(x)) = sigmoid(x) sigmoid(-x); the
/// second form keeps its precision where sigmoid(x) rounds to 1.
static double sigmoidDerivative(double x) { return sigmoid(x) * sigmoid(-x); }

LogGateDerivatives logGateDerivatives(GateSource source, double lowerBound,
                                      double aLog, double x) {
  const double rate = std::exp(aLog);
  switch (source) {
  case GateSource::Given:
    return {1.0, 0.0};
  case GateSource::Softplus:
    // g = -e^A softplus(x): dg/dx = -e^A sigmoid(x), dg/dA = g.
    return {-rate * sigmoid(x), -rate * softplus(x)};
  case GateSource::LowerBound: {
    // g = lb sigmoid(e^A x): dg/dx = lb sigmoid'(e^A x) e^A, dg/dA = that
    // times x (d(e^A x)/dA = e^A x).
    const double dg = lowerBound * sigmoidDerivative(rate * x) * rate;
    return {dg, dg * x};
  }
  }
  return {1.0, 0.0};
}

double betaDerivative(BetaSource source, double x) {
  switch (source) {
  case BetaSource::None:
  case BetaSource::Given:
    return 1.0;
  case BetaSource::Sigmoid:
    return sigmoidDerivative(x);
  case BetaSource::TwoSigmoid:
    return 2 * sigmoidDerivative(x);
  }
  return 1.0;
}

} // namespace lina::reference
