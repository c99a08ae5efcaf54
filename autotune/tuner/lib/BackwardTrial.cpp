//===- BackwardTrial.cpp - One backward candidate on the GPU -----------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/BackwardTrial.h"

#include "lina/Autotune/BackwardLoader.h"
#include "lina/Autotune/BackwardTuning.h"
#include "lina/Reference/Backward.h"
#include "lina/Reference/Reference.h"
#include "lina/Runtime/Device.h"

#include <algorithm>
#include <cstdio>
#include <random>

namespace lina {

namespace {

using Status_ = cache::CandidateStatus;

/// The check's tokens: partial chunks at every chunk size of the space, and
/// more than one chunk at all but the largest.
constexpr int64_t kCheckTokens = 3 * 64 + 5;

} // namespace

Expected<BackwardTimingInputs> BackwardTimingInputs::upload(
    const Spec &spec, int64_t batch, int64_t seqLen,
    const reference::HostInputs &host, const std::vector<uint8_t> &dO,
    int device, size_t flushBytes) {
  BackwardTimingInputs r;
  Expected<RotatingInputs> forward =
      RotatingInputs::upload(spec, batch, seqLen, host, device, flushBytes);
  if (!forward.ok())
    return forward.status();
  r.forward_ = std::move(*forward);
  void *dOPointer = nullptr;
  LINA_RETURN_IF_ERROR(
      uploadBuffer(device, dO.data(), dO.size(), r.buffers_, dOPointer));
  // One fp32 gradient per input the spec has, its input's element count:
  // every call overwrites them whole, so the copies can share them.
  size_t inputElement = reference::elementBytes(spec.dtype);
  BackwardArgs grads;
  auto gradient = [&](size_t elements, float *&field) -> Status {
    void *p = nullptr;
    LINA_RETURN_IF_ERROR(
        uploadBuffer(device, nullptr, elements * sizeof(float), r.buffers_, p));
    field = static_cast<float *>(p);
    return Status();
  };
  LINA_RETURN_IF_ERROR(gradient(host.q.size() / inputElement, grads.dq));
  LINA_RETURN_IF_ERROR(gradient(host.k.size() / inputElement, grads.dk));
  LINA_RETURN_IF_ERROR(gradient(host.v.size() / inputElement, grads.dv));
  LINA_RETURN_IF_ERROR(gradient(host.a.size() / inputElement, grads.da));
  LINA_RETURN_IF_ERROR(gradient(host.b.size() / inputElement, grads.db));
  LINA_RETURN_IF_ERROR(gradient(host.g.size(), grads.dg));
  LINA_RETURN_IF_ERROR(gradient(host.beta.size(), grads.dBeta));
  LINA_RETURN_IF_ERROR(gradient(host.gateALog.size(), grads.dGateALog));
  LINA_RETURN_IF_ERROR(gradient(host.gateDtBias.size(), grads.dGateDtBias));
  LINA_RETURN_IF_ERROR(
      gradient(host.initialState.size(), grads.dInitialState));
  for (size_t c = 0; c < r.forward_.copies(); ++c) {
    BackwardArgs a = grads;
    a.forward = r.forward_.args(c);
    // The backward reads the forward's inputs only: its outputs must be
    // null (dL/d(final state) null is zero).
    a.forward.o = nullptr;
    a.forward.finalState = nullptr;
    a.dO = dOPointer;
    r.args_.push_back(a);
  }
  return r;
}

BackwardGpuTrials::BackwardGpuTrials(const Spec &spec,
                                     const DeviceLimits &limits,
                                     const BuildTarget &target,
                                     cache::Cache *cache,
                                     const TrialSettings &settings,
                                     BackwardInputsFn inputs)
    : spec(spec), limits(limits), target(target), cache(cache),
      settings(settings), inputs(std::move(inputs)) {}

std::shared_ptr<BackwardGpuTrials::Built>
BackwardGpuTrials::build(const BackwardScheduleOptions &schedule) {
  std::string name = describe(schedule);
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = built.find(name);
    if (it != built.end())
      return it->second;
  }
  auto b = std::make_shared<Built>();
  Expected<BackwardPlan> plan = planBackwardKernel(spec, schedule);
  if (!plan.ok()) {
    b->error = plan.message();
  } else {
    Expected<SourceImage> image =
        buildBackwardImage(cache, *plan, target, compileBackwardPlan);
    if (image.ok()) {
      b->plan = std::move(*plan);
      b->cubin = std::move(image->cubin);
    } else {
      b->error = image.message();
    }
  }
  std::lock_guard<std::mutex> lock(mutex);
  return built.emplace(name, b).first->second;
}

void BackwardGpuTrials::prepare(
    const std::vector<BackwardScheduleOptions> &schedules) {
  buildInParallel(schedules.size(), settings.jobs,
                  [&](size_t i) { build(schedules[i]); });
}

cache::Candidate
BackwardGpuTrials::trial(const BackwardScheduleOptions &schedule) {
  cache::Candidate c = run(schedule);
  if (contextLostBy(c, settings.device))
    lost = true;
  return c;
}

/// A small problem with output gradients and the float64 backward's
/// gradients: the same for every candidate, so made once (at 96 heads of
/// d128 the reference takes seconds).
struct BackwardGpuTrials::Check {
  reference::Problem problem;
  reference::HostInputs host;
  reference::OutputGradients d;
  reference::Gradients expected;
};

Expected<std::string> BackwardGpuTrials::check(const BackwardKernel &kernel) {
  if (!checkData) {
    auto c = std::make_shared<Check>();
    std::mt19937_64 rng(7);
    c->problem = reference::randomProblem(spec, 1, kCheckTokens, rng);
    c->host = reference::encodeProblem(c->problem);
    c->d = reference::randomOutputGradients(c->problem, spec.finalState, rng);
    // dO rounded to the dtype as the device reads it, before the reference
    // sees it.
    reference::encodeInPlace(c->d.dO, spec.dtype);
    c->expected =
        reference::runRecurrentBackward(c->problem, c->d.dO, c->d.dFinalState);
    checkData = std::move(c);
  }
  Check &c = *checkData;
  Expected<reference::DeviceBackwardRun> run = reference::runBackwardOnDevice(
      kernel, c.problem, c.host, c.d.dO, c.d.dFinalState, settings.device);
  if (!run.ok())
    return run.status();
  double tolerance = reference::tolerance(spec.dtype);
  for (const reference::GradientError &e :
       reference::compareGradients(run->gradients, c.expected))
    if (!(e.error <= tolerance)) {
      char why[160];
      std::snprintf(why, sizeof why,
                    "%s differs from the float64 backward: relative error "
                    "%.3g (tolerance %.0e)",
                    e.name.c_str(), e.error, tolerance);
      return std::string(why);
    }
  return std::string();
}

cache::Candidate BackwardGpuTrials::run(const BackwardScheduleOptions &schedule) {
  std::shared_ptr<Built> b = build(schedule);
  if (!b->plan)
    return failedCandidate(Status_::CompileError, b->error);
  Expected<BackwardKernel> kernel =
      BackwardKernel::fromCubin(*b->plan, b->cubin, settings.device);
  if (!kernel.ok())
    return failedCandidate(Status_::LaunchError, kernel.message());

  // Registers are known only now; a kernel that cannot launch is pruned
  // here rather than failing at its first launch.
  const BackwardPlan &plan = kernel->plan();
  for (auto [f, shared] :
       {std::pair{&kernel->scansFunction(), plan.scansSharedBytes()},
        std::pair{&kernel->backwardFunction(), plan.backwardSharedBytes}}) {
    Expected<int> regs = f->numRegisters();
    if (!regs.ok())
      return failedCandidate(Status_::LaunchError, regs.message());
    std::string problem =
        launchLimitProblem(limits, plan.threads, *regs, shared);
    if (!problem.empty())
      return failedCandidate(Status_::LaunchError, "pruned: " + problem);
  }

  // Correct first, on a size the float64 backward replays quickly.
  Expected<std::string> mismatch = check(*kernel);
  if (!mismatch.ok())
    return failedCandidate(Status_::LaunchError, mismatch.message());
  if (!mismatch->empty())
    return failedCandidate(Status_::Mismatch, *mismatch);

  Expected<const BackwardTimingInputs *> timing = inputs();
  if (!timing.ok())
    return failedCandidate(Status_::LaunchError, timing.message());
  const BackwardTimingInputs &in = **timing;
  double giveUp = bestMs ? kTrialGiveUpFactor * *bestMs : 0;
  Expected<Timing> t = timeCalls(
      [&](size_t call) { return kernel->backward(in.args(call)); },
      in.args(0).forward.stream, settings.device, settings.warmup,
      settings.repeats, giveUp);
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
