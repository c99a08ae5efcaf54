//===- GpuBackwardCheck.cpp - `lina run --backward --device gpu` ---------===//
//
// Part of lina. The backward's kernels (planBackwardKernel) on the GPU
// against the float64 backward recurrence on the same rounded inputs and
// output gradients: each gradient's relative error, within the forward's
// tolerance for the dtype.
//
//===----------------------------------------------------------------------===//
#include "BackwardCheck.h"

#include "lina/Codegen/KernelPlanner.h"
#include "lina/Reference/Backward.h"
#include "lina/Reference/DeviceCheck.h"
#include "lina/Reference/Reference.h"

#include <cstdio>
#include <stdexcept>

namespace lina::cli {

BackwardScheduleOptions backwardScheduleFromOptions(const ArgParser &p) {
  BackwardScheduleOptions s;
  if (p.has("chunk-size"))
    s.chunkSize = p.getInt("chunk-size", 16, 256, 0);
  if (p.has("tile-v"))
    s.tileV = p.getInt("tile-v", 8, 1024, 0);
  if (p.has("warps"))
    s.warps = p.getInt("warps", 1, 16, 0);
  for (const char *forwardOnly : {"strategy", "segments", "value-halves"})
    if (p.has(forwardOnly))
      throw UsageError(std::string("--") + forwardOnly +
                       " is a knob of the forward's kernels; the backward "
                       "takes --chunk-size, --tile-v and --warps");
  return s;
}

int runGpuBackwardCheck(reference::Problem &problem, std::mt19937_64 &rng,
                        const BackwardScheduleOptions &options, int repeats) {
  const Spec &s = problem.spec;
  Expected<BackwardPlan> plan = planBackwardKernel(s, options);
  if (!plan.ok())
    throw UsageError(plan.message());
  Expected<BackwardKernel> kernel = BackwardKernel::load(*plan, 0);
  if (!kernel.ok())
    throw std::runtime_error(kernel.message());
  reference::HostInputs inputs = reference::encodeProblem(problem);
  reference::OutputGradients d =
      reference::randomOutputGradients(problem, s.finalState, rng);
  Expected<reference::DeviceBackwardRun> run = reference::runBackwardOnDevice(
      *kernel, problem, inputs, d.dO, d.dFinalState, 0, repeats);
  if (!run.ok())
    throw std::runtime_error(run.message());
  if (!reference::isFinite(reference::runRecurrent(problem)))
    return reportReferenceOverflow();
  // dO was rounded to the dtype in place: the reference sees what the GPU
  // read.
  reference::Gradients expected =
      reference::runRecurrentBackward(problem, d.dO, d.dFinalState);
  std::printf("backward    GPU kernels (chunk size %lld, tile-v %lld, %lld "
              "threads%s) against the float64 backward recurrence of L = "
              "<dO, o>%s\n",
              (long long)plan->chunkSize, (long long)plan->tileV,
              (long long)plan->threads,
              plan->spillFloats > 0 ? ", tiles past shared memory in global"
                                    : "",
              s.finalState ? " + <dht, final state>" : "");
  double tolerance = reference::tolerance(s.dtype);
  bool pass = true;
  for (const reference::GradientError &e :
       reference::compareGradients(run->gradients, expected)) {
    std::printf("grad %-9s rel. error %.3e\n", e.name.c_str(), e.error);
    pass = e.error <= tolerance && pass;
  }
  if (repeats > 0)
    std::printf("time        %.3f ms (median of %d)\n",
                run->medianMilliseconds, repeats);
  std::printf("tolerance   %.0e\n%s\n", tolerance, pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}

} // namespace lina::cli
