//===- BackwardCheck.cpp - `lina run --backward` --------------------------===//
//
// Part of lina. Finite differences run the float64 recurrence four times per
// input element, so the shapes this check accepts are small; the analytic
// gradients themselves cost about one forward run.
//
//===----------------------------------------------------------------------===//
#include "BackwardCheck.h"

#include "lina/Reference/Backward.h"
#include "lina/Reference/Reference.h"

#include <cstdio>

namespace lina::cli {

namespace {

/// State elements updated by all finite-difference runs together: four runs
/// per input element, each updating K x V state elements per token and value
/// head. The reference does about 5e8 a second, so this is some ten seconds.
constexpr double kMaxFiniteDifferenceUpdates = 5e9;

std::vector<double> normals(size_t count, std::mt19937_64 &rng) {
  std::normal_distribution<double> normal;
  std::vector<double> values(count);
  for (double &x : values)
    x = normal(rng);
  return values;
}

} // namespace

void checkBackwardOptions(const ArgParser &p) {
  if (p.get("device") == "gpu")
    throw UsageError("--backward checks the float64 backward reference on "
                     "the CPU; a GPU backward does not exist yet (drop "
                     "--device gpu)");
  for (const char *chunkFlag : {"chunk-size", "no-specialize"})
    if (p.has(chunkFlag))
      throw UsageError(std::string("--") + chunkFlag +
                       " configures the chunked forward program, which "
                       "--backward does not run");
}

void checkBackwardShape(const reference::Problem &problem) {
  const Spec &s = problem.spec;
  const double inputs = double(reference::countInputElements(problem));
  const double updatesPerRun = double(problem.batch) * double(problem.seqLen) *
                               double(s.valueHeads) * double(s.keyDim) *
                               double(s.valueDim);
  const double updates = 4 * inputs * updatesPerRun;
  if (updates <= kMaxFiniteDifferenceUpdates)
    return;
  char text[320];
  std::snprintf(text, sizeof text,
                "--shape is too large for --backward: finite differences run "
                "the float64 recurrence 4 times for each of %.0f input "
                "elements, %.3g state updates in all, at most %.0e: use fewer "
                "tokens or heads, or smaller --dk/--dv",
                inputs, updates, kMaxFiniteDifferenceUpdates);
  throw UsageError(text);
}

int runBackwardCheck(const reference::Problem &problem, std::mt19937_64 &rng) {
  const Spec &s = problem.spec;
  if (!reference::isFinite(reference::runRecurrent(problem))) {
    std::fprintf(stderr, "lina run: error: the float64 reference overflowed "
                         "on these random inputs, so there are no gradients "
                         "to check\n");
    std::printf("FAIL\n");
    return 1;
  }
  std::vector<double> dO =
      normals(problem.batch * problem.seqLen * s.valueHeads * s.valueDim, rng);
  std::vector<double> dFinalState;
  if (s.finalState)
    dFinalState = normals(
        problem.numSequences() * s.valueHeads * s.keyDim * s.valueDim, rng);

  reference::Gradients analytic =
      reference::runRecurrentBackward(problem, dO, dFinalState);
  reference::Gradients numeric = reference::finiteDifferenceGradients(
      problem, dO, dFinalState, reference::kFiniteDifferenceStep);
  std::printf("backward    float64 recurrence against central differences "
              "(4th order, step %.0e) of L = <dO, o>%s\n",
              reference::kFiniteDifferenceStep,
              s.finalState ? " + <dht, final state>" : "");
  bool pass = true;
  for (const reference::GradientError &e :
       reference::compareGradients(analytic, numeric)) {
    std::printf("grad %-9s rel. error %.3e\n", e.name.c_str(), e.error);
    pass = pass && e.error <= reference::kBackwardTolerance;
  }
  std::printf("tolerance   %.0e\n%s\n", reference::kBackwardTolerance,
              pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}

} // namespace lina::cli
