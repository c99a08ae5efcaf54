//===- Backward.h - Gradients of the recurrence in float64 ------*- C++ -*-===//
//
// Part of lina. The backward pass of the generic recurrence (design section
// 1) for every spec, token by token in float64, and the central finite
// differences of the forward reference it is checked against. Backward
// kernels are judged against runRecurrentBackward; finite differences cost
// four forward runs per input element and only serve small shapes.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_REFERENCE_BACKWARD_H
#define LINA_REFERENCE_BACKWARD_H

#include "lina/Reference/Problem.h"

#include <random>
#include <string>
#include <vector>

namespace lina::reference {

/// dL/dx for every input x of a Problem, in that input's layout (Problem.h).
/// A gradient is empty exactly where the problem's input is: g for decay
/// none, A_log and dt_bias for a given gate (dt_bias also when the problem
/// leaves it empty, meaning zero), beta without beta, a and b unless they
/// are dplr inputs, the initial state when the spec has none. dg of a fixed
/// decay sums over every token of every sequence.
struct Gradients {
  std::vector<double> dq, dk, dv, dg, dGateALog, dGateDtBias, dBeta, da, db,
      dInitialState;
};

/// The gradients of L = <dO, o> + <dFinalState, finalState>, where o and
/// finalState are what runRecurrent(p) returns. dO is [B, T, HV, V];
/// dFinalState is [N, HV, K, V], or empty for zero (it must be empty when
/// the spec has no final state). Recomputes the forward states and runs the
/// recurrence backwards (docs/algorithms.md, "Backward"): O(T K V) per
/// (sequence, value head). Aborts with a message on inconsistent shapes.
Gradients runRecurrentBackward(const Problem &p, const std::vector<double> &dO,
                               const std::vector<double> &dFinalState);

/// A loss's gradients with respect to the outputs: dO [B, T, HV, V] and, when
/// asked for, dFinalState [N, HV, K, V] (else empty, meaning zero).
struct OutputGradients {
  std::vector<double> dO, dFinalState;
};

/// N(0, 1) output gradients for `p` drawn from `rng`: the dL/do (and dL/dht
/// when `withFinalState`) that backward checks run on.
OutputGradients randomOutputGradients(const Problem &p, bool withFinalState,
                                      std::mt19937_64 &rng);

/// The same gradients by fourth-order central differences,
///   (8 (L(x + h) - L(x - h)) - (L(x + 2h) - L(x - 2h))) / (12 h),  h = step,
/// for each input element x in turn, L evaluated by runRecurrent. The
/// fourth order lets the step be large enough that rounding in L stays far
/// below the tolerance even for a gradient much smaller than L (an initial
/// state that a strong gate forgets within a few tokens).
Gradients finiteDifferenceGradients(const Problem &p,
                                    const std::vector<double> &dO,
                                    const std::vector<double> &dFinalState,
                                    double step);

/// Relative error above which an analytic gradient disagrees with finite
/// differences of step kFiniteDifferenceStep on the small problems tests and
/// `lina run --backward` use. Agreement there is near 2e-9: truncation
/// (h^4) and rounding (1/h) balance around this step. Never loosen the
/// tolerance to make a case pass: a derivation that misses a term is off by
/// far more.
constexpr double kBackwardTolerance = 1e-7;
constexpr double kFiniteDifferenceStep = 5e-4;

/// One gradient's distance from its reference: relativeError(x, reference).
struct GradientError {
  std::string name; ///< "dq", "dk", ..., "dh0"
  double error = 0;
};

/// The relative error of every gradient either side has (a gradient present
/// on one side only compares as infinitely wrong), in Gradients' order.
std::vector<GradientError> compareGradients(const Gradients &x,
                                            const Gradients &reference);

/// The number of input elements finite differences perturb: the sizes of
/// all of p's differentiable inputs together.
int64_t countInputElements(const Problem &p);

} // namespace lina::reference

#endif // LINA_REFERENCE_BACKWARD_H
