//===- BackwardCheck.cpp - `lina run --backward` --------------------------===//
//
// Part of lina. Finite differences run the float64 recurrence four times per
// input element, so the shapes this check accepts are small; the analytic
// gradients themselves cost about one forward run.
//
//===----------------------------------------------------------------------===//
#include "BackwardCheck.h"

#include "lina/Codegen/CpuExecutor.h"
#include "lina/Reference/Backward.h"
#include "lina/Reference/Reference.h"

#include "mlir/IR/MLIRContext.h"

#include <algorithm>
#include <cstdio>

namespace lina::cli {

namespace {

/// State elements updated by all finite-difference runs together: four runs
/// per input element, each updating K x V state elements per token and value
/// head. The reference does about 5e8 a second, so this is some ten seconds.
constexpr double kMaxFiniteDifferenceUpdates = 5e9;

} // namespace

int reportReferenceOverflow() {
  std::fprintf(stderr, "lina run: error: the float64 reference overflowed on "
                       "these random inputs, so there are no gradients to "
                       "check\n");
  std::printf("FAIL\n");
  return 1;
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

int runBackwardCheck(const reference::Problem &problem, std::mt19937_64 &rng,
                     const ChunkOptions &chunk) {
  const Spec &s = problem.spec;
  if (!reference::isFinite(reference::runRecurrent(problem)))
    return reportReferenceOverflow();
  reference::OutputGradients d =
      reference::randomOutputGradients(problem, s.finalState, rng);
  const std::vector<double> &dO = d.dO, &dFinalState = d.dFinalState;

  mlir::MLIRContext ctx;
  std::string error;
  ChunkOptions options = chunk;
  options.backward = true;
  auto module = buildChunkedProgram(ctx, s, options, error);
  if (!module)
    throw UsageError(error);
  reference::Gradients chunked;
  if (!executeChunkedBackward(*module->getOps<ChunkedOp>().begin(),
                              *module->getOps<ChunkedBackwardOp>().begin(),
                              problem, dO, dFinalState, chunked, error)) {
    std::fprintf(stderr, "lina run: error: %s\n", error.c_str());
    return 1;
  }
  reference::Gradients analytic =
      reference::runRecurrentBackward(problem, dO, dFinalState);
  reference::Gradients numeric = reference::finiteDifferenceGradients(
      problem, dO, dFinalState, reference::kFiniteDifferenceStep);
  std::printf("backward    chunked program (lina-chunk-backward, chunk size "
              "%lld) and float64 recurrence against central differences "
              "(4th order, step %.0e) of L = <dO, o>%s\n",
              (long long)chunk.chunkSize, reference::kFiniteDifferenceStep,
              s.finalState ? " + <dht, final state>" : "");
  std::vector<reference::GradientError> ofChunked =
      reference::compareGradients(chunked, numeric);
  std::vector<reference::GradientError> ofRecurrence =
      reference::compareGradients(analytic, numeric);
  // compareGradients lists the same gradients in the same order for both.
  bool pass = ofChunked.size() == ofRecurrence.size();
  for (size_t i = 0; i < std::min(ofChunked.size(), ofRecurrence.size());
       ++i) {
    std::printf("grad %-9s rel. error %.3e   (recurrence %.3e)\n",
                ofChunked[i].name.c_str(), ofChunked[i].error,
                ofRecurrence[i].error);
    pass = ofChunked[i].error <= reference::kBackwardTolerance &&
           ofRecurrence[i].error <= reference::kBackwardTolerance && pass;
  }
  std::printf("tolerance   %.0e\n%s\n", reference::kBackwardTolerance,
              pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}

} // namespace lina::cli
