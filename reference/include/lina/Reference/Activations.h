//===- Activations.h - Gate and beta activations in float64 -----*- C++ -*-===//
//
// Part of lina. The elementwise functions a spec applies in the kernel to its
// gate and beta inputs, written once: the reference and the CPU executor both
// call these.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_REFERENCE_ACTIVATIONS_H
#define LINA_REFERENCE_ACTIVATIONS_H

#include "lina/Spec/Spec.h"

namespace lina::reference {

/// log(1 + e^x) without overflow for large x or loss of precision for very
/// negative x.
double softplus(double x);

/// 1 / (1 + e^-x), evaluated so that e^(...) never overflows.
double sigmoid(double x);

/// The log gate from its pre-activation `x` (dt_bias already added) under a
/// computed gate source: softplus: -exp(A_log) softplus(x); lower_bound:
/// lower_bound * sigmoid(exp(A_log) x). A given gate returns `x`.
double computedLogGate(GateSource source, double lowerBound, double aLog,
                       double x);

/// beta from its input: as given, sigmoid, or 2 sigmoid.
double betaFromInput(BetaSource source, double x);

} // namespace lina::reference

#endif // LINA_REFERENCE_ACTIVATIONS_H
