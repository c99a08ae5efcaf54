//===- BackwardTrial.h - One backward candidate on the GPU ------*- C++ -*-===//
//
// Part of lina. What a backward tune on the GPU does with a candidate, as
// TuneTrial.h does for the forward: build its cubin through the cubin cache
// (batches in parallel), load it, prune it on its registers, check its
// gradients against the float64 backward recurrence on a small problem (a
// wrong kernel may never win), then time backward calls at the tuned shape
// on random inputs and output gradients. No forward call is needed: the
// backward recomputes the chunk states itself.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_BACKWARDTRIAL_H
#define LINA_AUTOTUNE_BACKWARDTRIAL_H

#include "lina/Autotune/Cache.h"
#include "lina/Autotune/DeviceLimits.h"
#include "lina/Autotune/KernelBuild.h"
#include "lina/Autotune/TuneTiming.h"
#include "lina/Autotune/TuneTrial.h"
#include "lina/Runtime/BackwardKernel.h"

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

namespace lina {

/// Backward calls at the tuned shape: the forward's inputs rotated over
/// copies (RotatingInputs), one dO and one fp32 buffer per gradient the
/// spec has, shared by every candidate.
class BackwardTimingInputs {
public:
  /// `host` and `dO` (o's layout, in the spec's dtype) hold `batch`
  /// sequences of `seqLen` tokens; a varlen spec gets them packed.
  static Expected<BackwardTimingInputs>
  upload(const Spec &spec, int64_t batch, int64_t seqLen,
         const reference::HostInputs &host, const std::vector<uint8_t> &dO,
         int device, size_t flushBytes);
  size_t copies() const { return args_.size(); }
  const BackwardArgs &args(size_t i) const { return args_[i % args_.size()]; }

private:
  RotatingInputs forward_;
  std::vector<cuda::DeviceBuffer> buffers_;
  std::vector<BackwardArgs> args_;
};

/// The timing inputs, made on first use (seconds at large shapes; a tune
/// that finds everything recorded makes none).
using BackwardInputsFn = std::function<Expected<const BackwardTimingInputs *>()>;

class BackwardGpuTrials {
public:
  BackwardGpuTrials(const Spec &spec, const DeviceLimits &limits,
                    const BuildTarget &target, cache::Cache *cache,
                    const TrialSettings &settings, BackwardInputsFn inputs);

  /// Plans and compiles every schedule not built yet, `jobs` at a time.
  void prepare(const std::vector<BackwardScheduleOptions> &schedules);
  cache::Candidate trial(const BackwardScheduleOptions &schedule);
  /// True once a candidate's fault has left the GPU context unusable.
  bool contextLost() const { return lost; }

private:
  cache::Candidate run(const BackwardScheduleOptions &schedule);
  struct Built {
    std::optional<BackwardPlan> plan;
    std::string cubin;
    std::string error;
  };
  std::shared_ptr<Built> build(const BackwardScheduleOptions &schedule);
  /// Why the gradients of `kernel` differ from the float64 backward on a
  /// small problem, or "" when they agree.
  Expected<std::string> check(const BackwardKernel &kernel);
  struct Check;
  std::shared_ptr<Check> checkData;

  Spec spec;
  DeviceLimits limits;
  BuildTarget target;
  cache::Cache *cache;
  TrialSettings settings;
  BackwardInputsFn inputs;
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<Built>> built;
  std::optional<double> bestMs;
  bool lost = false;
};

} // namespace lina

#endif // LINA_AUTOTUNE_BACKWARDTRIAL_H
