//===- TuneTrial.cpp - One candidate on the GPU ------------------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/TuneTrial.h"

#include "lina/Autotune/KernelLoader.h"
#include "lina/Autotune/ScheduleKnobs.h"
#include "lina/Autotune/SearchSpace.h"
#include "lina/Reference/Reference.h"
#include "lina/Runtime/Device.h"

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>

namespace lina {

namespace {

using Status_ = cache::CandidateStatus;

} // namespace

cache::Candidate failedCandidate(cache::CandidateStatus status,
                                 std::string error) {
  cache::Candidate c;
  c.status = status;
  constexpr size_t kMaxError = 2000;
  if (error.size() > kMaxError)
    error = error.substr(0, kMaxError) + "...";
  c.error = std::move(error);
  return c;
}

void buildInParallel(size_t count, unsigned jobs,
                     const std::function<void(size_t)> &build) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < count; i = next++)
      build(i);
  };
  jobs = std::max(1u, std::min<unsigned>(jobs, count));
  std::vector<std::thread> threads;
  for (unsigned j = 1; j < jobs; ++j)
    threads.emplace_back(worker);
  worker();
  for (std::thread &t : threads)
    t.join();
}

bool contextLostBy(cache::Candidate &c, int device) {
  if (c.status != Status_::LaunchError && c.status != Status_::Mismatch)
    return false;
  // A fault inside the kernel is sticky: the context refuses everything
  // after it. Ask it once; the candidate keeps its own error.
  Status alive = cuda::synchronizeDevice(device);
  if (alive.ok())
    return false;
  c.error += " (the GPU context was lost: " + alive.message() + ")";
  return true;
}

GpuTrials::GpuTrials(const Spec &spec, const DeviceLimits &limits,
                     const BuildTarget &target, cache::Cache *cache,
                     const TrialSettings &settings, InputsFn inputs)
    : spec(spec), limits(limits), target(target), cache(cache),
      settings(settings), inputs(std::move(inputs)) {}

std::shared_ptr<GpuTrials::Built>
GpuTrials::build(const ScheduleOptions &schedule) {
  std::string name = describe(schedule);
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = built.find(name);
    if (it != built.end())
      return it->second;
  }
  auto b = std::make_shared<Built>();
  Expected<BuiltImage> image =
      buildKernelImage(cache, spec, schedule, target, defaultBuildSteps());
  if (image.ok())
    b->image = std::move(*image);
  else
    b->error = image.message();
  std::lock_guard<std::mutex> lock(mutex);
  return built.emplace(name, b).first->second;
}

void GpuTrials::prepare(const std::vector<ScheduleOptions> &schedules) {
  buildInParallel(schedules.size(), settings.jobs,
                  [&](size_t i) { build(schedules[i]); });
}

cache::Candidate GpuTrials::trial(const ScheduleOptions &schedule) {
  cache::Candidate c = run(schedule);
  if (contextLostBy(c, settings.device))
    lost = true;
  return c;
}

cache::Candidate GpuTrials::run(const ScheduleOptions &schedule) {
  std::shared_ptr<Built> b = build(schedule);
  if (!b->image)
    return failedCandidate(Status_::CompileError, b->error);
  Expected<ChunkKernel> kernel =
      ChunkKernel::loadImage(b->image->plan, b->image->cubin, settings.device);
  if (!kernel.ok())
    return failedCandidate(Status_::LaunchError, kernel.message());

  // Registers are known only now; a kernel that cannot launch is pruned
  // here rather than failing at its first launch.
  const KernelPlan &plan = kernel->plan();
  for (const cuda::Kernel *f :
       {&kernel->scanFunction(), &kernel->outputFunction(),
        &kernel->prepareFunction()}) {
    if (!f->handle())
      continue;
    Expected<int> regs = f->numRegisters();
    if (!regs.ok())
      return failedCandidate(Status_::LaunchError, regs.message());
    unsigned shared = f == &kernel->scanFunction() ? plan.scanSharedBytes
                      : f == &kernel->outputFunction()
                          ? plan.outputSharedBytes
                          : plan.prepareSharedBytes;
    std::string problem =
        launchLimitProblem(limits, plan.threads, *regs, shared);
    if (!problem.empty())
      return failedCandidate(Status_::LaunchError, "pruned: " + problem);
  }

  // Correct first, on a size the float64 reference replays quickly.
  std::mt19937_64 rng(7);
  reference::Problem small =
      reference::randomProblem(spec, 1, 3 * schedule.chunkSize + 5, rng);
  reference::HostInputs smallInputs = reference::encodeProblem(small);
  Expected<reference::DeviceRun> checked =
      reference::runOnDevice(*kernel, small, smallInputs, settings.device);
  if (!checked.ok())
    return failedCandidate(Status_::LaunchError, checked.message());
  reference::Comparison c = reference::compareWithReference(small, *checked);
  if (!c.passed)
    return failedCandidate(
        Status_::Mismatch,
        "relative error " +
            std::to_string(std::max(c.outputError, c.stateError)));

  Expected<const RotatingInputs *> timing = inputs();
  if (!timing.ok())
    return failedCandidate(Status_::LaunchError, timing.message());
  double giveUp = bestMs ? kTrialGiveUpFactor * *bestMs : 0;
  Expected<Timing> t = timeForward(*kernel, **timing, settings.device,
                                   settings.warmup, settings.repeats, giveUp);
  if (!t.ok())
    return failedCandidate(Status_::LaunchError, t.message());
  if (!bestMs || t->medianMs < *bestMs)
    bestMs = t->medianMs;
  cache::Candidate ok;
  ok.status = Status_::Ok;
  ok.timeMs = t->medianMs;
  return ok;
}

} // namespace lina
