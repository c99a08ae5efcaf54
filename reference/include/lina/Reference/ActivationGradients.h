//===- ActivationGradients.h - Derivatives of the activations ---*- C++ -*-===//
//
// Part of lina. The derivatives of the functions in Activations.h, for the
// chain rule from the log gate and beta back to the inputs a spec is given:
// the backward reference's and the CPU executor's backward ops share them.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_REFERENCE_ACTIVATIONGRADIENTS_H
#define LINA_REFERENCE_ACTIVATIONGRADIENTS_H

#include "lina/Spec/Spec.h"

namespace lina::reference {

/// The partial derivatives of computedLogGate(source, lowerBound, aLog, x)
/// with respect to its pre-activation x (dt_bias already added, so also with
/// respect to dt_bias) and to A_log. A given gate has dx = 1, dALog = 0.
struct LogGateDerivatives {
  double dx = 0, dALog = 0;
};
LogGateDerivatives logGateDerivatives(GateSource source, double lowerBound,
                                      double aLog, double x);

/// d betaFromInput(source, x) / dx.
double betaDerivative(BetaSource source, double x);

} // namespace lina::reference

#endif // LINA_REFERENCE_ACTIVATIONGRADIENTS_H
