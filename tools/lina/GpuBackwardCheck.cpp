//===- GpuBackwardCheck.cpp - `lina run --backward --device gpu` ---------===//
//
// Part of lina. The backward's kernels (planBackwardKernel) on the GPU
// against the float64 backward recurrence on the same rounded inputs and
// output gradients: each gradient's relative error, within the forward's
// tolerance for the dtype. With no knob given, the schedule is the one
// `lina tune --backward` recorded for the shape's bucket, else the default.
//
//===----------------------------------------------------------------------===//
#include "BackwardCheck.h"

#include "lina/Autotune/BackwardLoader.h"
#include "lina/Autotune/BackwardTuning.h"
#include "lina/Autotune/KernelLoader.h"
#include "lina/Codegen/KernelPlanner.h"
#include "lina/Reference/Backward.h"
#include "lina/Reference/DeviceCheck.h"
#include "lina/Reference/Reference.h"

#include <algorithm>
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
  if (p.has("barrier-window"))
    s.barrierWindow = p.getInt("barrier-window", 0, 64, 0);
  for (const char *forwardOnly : {"strategy", "segments"})
    if (p.has(forwardOnly))
      throw UsageError(std::string("--") + forwardOnly +
                       " is a knob of the forward's kernels; the backward "
                       "takes --chunk-size, --tile-v and --warps");
  return s;
}

namespace {

/// The schedule a backward call of `problem`'s shape runs when no knob is
/// given: what `lina tune --backward` recorded for its bucket (the exact
/// spec's, else its family's), else the default. Says which on stdout.
BackwardScheduleOptions tunedOrDefault(const reference::Problem &problem) {
  int64_t longest = problem.seqLen;
  if (problem.spec.varlen) {
    longest = 0;
    for (size_t n = 0; n + 1 < problem.cuSeqlens.size(); ++n)
      longest = std::max(longest,
                         problem.cuSeqlens[n + 1] - problem.cuSeqlens[n]);
  }
  Expected<cuda::Device> device = cuda::queryDevice(0);
  // Without a GPU the load that follows says so.
  if (!device.ok())
    return defaultBackwardSchedule(problem.spec);
  cache::Cache *cache = processCache();
  std::optional<TunedBackward> tuned;
  if (cache)
    tuned = lookupTunedBackward(*cache, problem.spec, gpuIdentity(*device),
                                nvrtcVersionString(), problem.numSequences(),
                                longest);
  if (!tuned) {
    std::printf("schedule    default (no backward tune recorded for this "
                "shape's bucket)\n");
    return defaultBackwardSchedule(problem.spec);
  }
  std::printf("schedule    tuned %s%s\n", describe(tuned->schedule).c_str(),
              tuned->source == TunedSource::Family
                  ? " (for a spec that differs only in flags)"
                  : "");
  return tuned->schedule;
}

} // namespace

int runGpuBackwardCheck(reference::Problem &problem, std::mt19937_64 &rng,
                        const BackwardScheduleOptions &asked, int repeats,
                        bool useCache, bool check) {
  const Spec &s = problem.spec;
  bool open = asked.chunkSize == 0 && asked.tileV == 0 && asked.warps == 0;
  BackwardScheduleOptions options =
      open && useCache ? tunedOrDefault(problem) : asked;
  // --barrier-window alone keeps the tuned layout; without it, the tuned
  // window stands.
  if (asked.barrierWindow > 0)
    options.barrierWindow = asked.barrierWindow;
  Expected<BackwardPlan> plan = planBackwardKernel(s, options);
  if (!plan.ok())
    throw UsageError(plan.message());
  // Through the cubin cache (a tune's candidates are there), unless
  // --no-cache.
  Expected<BackwardKernel> kernel = useCache
                                        ? loadBackwardKernel(*plan, 0)
                                        : BackwardKernel::load(*plan, 0);
  if (!kernel.ok())
    throw std::runtime_error(kernel.message());
  reference::HostInputs inputs = reference::encodeProblem(problem);
  reference::OutputGradients d =
      reference::randomOutputGradients(problem, s.finalState, rng);
  Expected<reference::DeviceBackwardRun> run = reference::runBackwardOnDevice(
      *kernel, problem, inputs, d.dO, d.dFinalState, 0, repeats);
  if (!run.ok())
    throw std::runtime_error(run.message());
  // The time before the float64 backward, which takes long at large shapes.
  if (repeats > 0) {
    // The tokens as timed, so that a timing is never read as another
    // shape's.
    std::string window =
        options.barrierWindow > 0
            ? ", barrier window " + std::to_string(options.barrierWindow)
            : "";
    std::printf("time        %.3f ms (median of %d on %lld x %lld tokens; "
                "chunk size %lld, tile-v %lld, %lld threads%s)\n",
                run->medianMilliseconds, repeats,
                (long long)problem.numSequences(),
                (long long)(problem.spec.varlen ? problem.cuSeqlens.back()
                                                : problem.seqLen),
                (long long)plan->chunkSize, (long long)plan->tileV,
                (long long)plan->threads, window.c_str());
    std::fflush(stdout);
  }
  if (!check) {
    std::printf("backward    not checked (--no-check)\n");
    return 0;
  }
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
  std::printf("tolerance   %.0e\n%s\n", tolerance, pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}

} // namespace lina::cli
