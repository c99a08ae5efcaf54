//===- TuneTrial.h - One candidate on the GPU -------------------*- C++ -*-===//
//
// Part of lina. What a tune on the GPU does with a candidate: build its cubin
// (through the cubin cache, so the winner later loads warm; batches are
// compiled in parallel on the CPU, NVRTC being thread-safe per program),
// load it, prune it on its registers, check it against the float64
// reference on a small problem (a wrong kernel may never win), then time it
// at the tuned shape. Every failure becomes the candidate's status.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_TUNETRIAL_H
#define LINA_AUTOTUNE_TUNETRIAL_H

#include "lina/Autotune/Cache.h"
#include "lina/Autotune/DeviceLimits.h"
#include "lina/Autotune/KernelBuild.h"
#include "lina/Autotune/TuneTiming.h"

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

namespace lina {

struct TrialSettings {
  int warmup = 3;
  int repeats = 10;
  unsigned jobs = 1; ///< parallel compiles
  int device = 0;    ///< the GPU's ordinal
};

/// A candidate slower than this many times the best so far cannot win; it
/// is timed once (the forward's and the backward's trials alike).
inline constexpr double kTrialGiveUpFactor = 5;

/// A candidate recorded as `status` with `error`, cut to its first 2000
/// characters: NVRTC's message carries the numbered source, and the first
/// lines say why.
cache::Candidate failedCandidate(cache::CandidateStatus status,
                                 std::string error);

/// Calls `build(i)` for every i below `count`, on up to `jobs` threads
/// (this one among them): the forward's and the backward's trials compile
/// a batch this way, NVRTC being thread-safe per program.
void buildInParallel(size_t count, unsigned jobs,
                     const std::function<void(size_t)> &build);

/// After a candidate failed at launch or mismatched: whether its fault left
/// the GPU context unusable (a sticky error such as an illegal address),
/// which then also goes into `c`'s error. Other statuses are not checked.
bool contextLostBy(cache::Candidate &c, int device);

/// The inputs at the tuned shape, made on first use: a tune that finds
/// everything recorded needs none (they take seconds to make at large
/// shapes).
using InputsFn = std::function<Expected<const RotatingInputs *>()>;

class GpuTrials {
public:
  GpuTrials(const Spec &spec, const DeviceLimits &limits,
            const BuildTarget &target, cache::Cache *cache,
            const TrialSettings &settings, InputsFn inputs);

  /// Builds (plans and compiles) every schedule not built yet, `jobs` at a
  /// time.
  void prepare(const std::vector<ScheduleOptions> &schedules);
  cache::Candidate trial(const ScheduleOptions &schedule);
  /// True once a candidate's fault has left the GPU context unusable (a
  /// sticky error such as an illegal address): every later launch in this
  /// process would fail, so the tune must stop and be resumed.
  bool contextLost() const { return lost; }

private:
  cache::Candidate run(const ScheduleOptions &schedule);
  struct Built {
    std::optional<BuiltImage> image;
    std::string error;
  };
  std::shared_ptr<Built> build(const ScheduleOptions &schedule);

  Spec spec;
  DeviceLimits limits;
  BuildTarget target;
  cache::Cache *cache;
  TrialSettings settings;
  InputsFn inputs;
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<Built>> built;
  std::optional<double> bestMs;
  bool lost = false;
};

} // namespace lina

#endif // LINA_AUTOTUNE_TUNETRIAL_H
