//===- FiniteDifferences.cpp - Gradients by central differences -----------===//
//
// Part of lina. The independent check of runRecurrentBackward: it shares no
// code with it beyond runRecurrent, the forward oracle itself, so a term the
// derivation misses shows up here as a mismatch.
//
//===----------------------------------------------------------------------===//
#include "lina/Reference/Backward.h"
#include "lina/Reference/Reference.h"

#include <cstdio>
#include <cstdlib>

namespace lina::reference {

namespace {

/// The gradients' fields, named, paired with the problem's inputs.
struct Field {
  const char *name;
  std::vector<double> Gradients::*gradient;
  std::vector<double> Problem::*input;
};
constexpr Field kFields[] = {
    {"dq", &Gradients::dq, &Problem::q},
    {"dk", &Gradients::dk, &Problem::k},
    {"dv", &Gradients::dv, &Problem::v},
    {"dg", &Gradients::dg, &Problem::g},
    {"dA_log", &Gradients::dGateALog, &Problem::gateALog},
    {"ddt_bias", &Gradients::dGateDtBias, &Problem::gateDtBias},
    {"dbeta", &Gradients::dBeta, &Problem::beta},
    {"da", &Gradients::da, &Problem::a},
    {"db", &Gradients::db, &Problem::b},
    {"dh0", &Gradients::dInitialState, &Problem::initialState},
};

/// L = <dO, o> + <dFinalState, finalState> for the problem as it is now.
double loss(const Problem &p, const std::vector<double> &dO,
            const std::vector<double> &dFinalState) {
  Result r = runRecurrent(p);
  double sum = 0;
  for (size_t i = 0; i < dO.size(); ++i)
    sum += dO[i] * r.o[i];
  for (size_t i = 0; i < dFinalState.size(); ++i)
    sum += dFinalState[i] * r.finalState[i];
  return sum;
}

} // namespace

Gradients finiteDifferenceGradients(const Problem &p,
                                    const std::vector<double> &dO,
                                    const std::vector<double> &dFinalState,
                                    double step) {
  const Spec &s = p.spec;
  const size_t outputs = p.batch * p.seqLen * s.valueHeads * s.valueDim;
  const size_t states = p.numSequences() * s.valueHeads * s.keyDim * s.valueDim;
  if (dO.size() != outputs ||
      (!dFinalState.empty() && dFinalState.size() != states)) {
    std::fprintf(stderr, "lina::reference::finiteDifferenceGradients: dO or "
                         "dFinalState does not match the problem's outputs\n");
    std::abort();
  }
  Problem work = p;
  Gradients grad;
  for (const Field &field : kFields) {
    std::vector<double> &x = work.*field.input;
    std::vector<double> &dx = grad.*field.gradient;
    dx.assign(x.size(), 0.0);
    for (size_t i = 0; i < x.size(); ++i) {
      const double original = x[i];
      auto lossAt = [&](double offset) {
        x[i] = original + offset;
        return loss(work, dO, dFinalState);
      };
      dx[i] = (8 * (lossAt(step) - lossAt(-step)) -
               (lossAt(2 * step) - lossAt(-2 * step))) /
              (12 * step);
      x[i] = original;
    }
  }
  return grad;
}

std::vector<GradientError> compareGradients(const Gradients &x,
                                            const Gradients &reference) {
  std::vector<GradientError> errors;
  for (const Field &field : kFields) {
    const std::vector<double> &a = x.*field.gradient,
                              &b = reference.*field.gradient;
    if (a.empty() && b.empty())
      continue;
    errors.push_back({field.name, relativeError(a, b)});
  }
  return errors;
}

int64_t countInputElements(const Problem &p) {
  int64_t count = 0;
  for (const Field &field : kFields)
    count += static_cast<int64_t>((p.*field.input).size());
  return count;
}

} // namespace lina::reference
