//===- Tuner.h - Full sweep and fast search of a schedule space -*- C++ -*-===//
//
// Part of lina. The tuner's logic without a GPU: what to try, in which
// order, what is already recorded, what wins. Running a candidate is a
// function passed in (`lina tune` compiles, checks and times on the GPU;
// tests and `--simulate` pass a fake timer), so resuming and the fast mode's
// choices are tested on any machine.
//
// Every candidate is recorded in the cache as soon as it is tried, in its own
// transaction, whatever its status, and one already recorded under the key
// is read back instead of tried again: a killed tune resumes where it
// stopped, and a full sweep after a fast one times only what fast did not.
// A candidate is marked (status timeout) before its trial, so one that kills
// or hangs the process is tried once more by the next run and then skipped.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_TUNER_H
#define LINA_AUTOTUNE_TUNER_H

#include "lina/Autotune/Cache.h"
#include "lina/Autotune/ScheduleKnobs.h"

#include <cstddef>
#include <functional>
#include <optional>
#include <vector>

namespace lina {

/// Compiles, checks and times one schedule; failures are a status, not an
/// exception (one that escapes anyway is recorded as a launch error).
template <typename Schedule>
using BasicTrialFn = std::function<cache::Candidate(const Schedule &)>;
/// Gets a batch of schedules ready before their trials, e.g. compiles them
/// in parallel. Optional.
template <typename Schedule>
using BasicPrepareFn = std::function<void(const std::vector<Schedule> &)>;

struct TuneEvent {
  size_t index = 0; ///< candidates looked at so far, this one included
  size_t limit = 0; ///< the most this run will look at
  const cache::Candidate *candidate = nullptr;
  bool recorded = false; ///< read from the cache, not tried now
  const cache::Candidate *best = nullptr; ///< null while none is Ok
};

/// How one search runs; `Schedule` is the forward's ScheduleOptions or the
/// backward's BackwardScheduleOptions (BackwardTuning.h).
template <typename Schedule> struct BasicTuneConfig {
  BasicTrialFn<Schedule> trial;
  BasicPrepareFn<Schedule> prepare;
  std::function<void(const TuneEvent &)> progress;
  /// Stop after this many new trials (0: no limit), as if killed there.
  size_t maxNewTrials = 0;
  /// Never try anything: a candidate that is not recorded ends the run
  /// unfinished. Replays a search on recorded times (--compare).
  bool recordedOnly = false;
  /// Asked after each trial (once it is recorded); true ends the run
  /// unfinished. `lina tune` stops when a fault has broken the GPU context,
  /// which would fail every later candidate: a new process resumes.
  std::function<bool()> stop;
};

template <typename Schedule> struct BasicTuneResult {
  std::optional<cache::Candidate> best;
  size_t looked = 0;   ///< distinct candidates looked at
  size_t tried = 0;    ///< of which tried now
  size_t recorded = 0; ///< of which read from the cache
  bool finished = true;
  /// The fast mode's walk: each schedule it moved to, the start first.
  std::vector<Schedule> path;
};

using TrialFn = BasicTrialFn<ScheduleOptions>;
using PrepareFn = BasicPrepareFn<ScheduleOptions>;
using TuneConfig = BasicTuneConfig<ScheduleOptions>;
using TuneResult = BasicTuneResult<ScheduleOptions>;

/// Looks at every schedule of `viable`, in order.
TuneResult tuneFull(cache::Cache &cache, const cache::TuningKey &key,
                    const std::vector<ScheduleOptions> &viable,
                    const TuneConfig &config);

/// Coordinate descent from `start` (the heuristic default; the first viable
/// schedule when it is not viable): each round tries every other value of
/// one knob at a time, keeping the others, and moves to the fastest; it ends
/// when a round finds nothing faster or `budget` candidates were looked at.
TuneResult tuneFast(cache::Cache &cache, const cache::TuningKey &key,
                    const std::vector<ScheduleKnob> &knobs,
                    const std::vector<ScheduleOptions> &viable,
                    const ScheduleOptions &start, size_t budget,
                    const TuneConfig &config);

/// What fast mode picks against what the full sweep found, from recorded
/// times only (no trial runs). nullopt unless every viable schedule is
/// recorded and one of them is Ok.
struct FastVsFull {
  cache::Candidate fast, full;
  size_t fastLooked = 0, viable = 0;
  /// fast's time / full's time, >= 1.
  double ratio = 1;
};
std::optional<FastVsFull>
compareFastToFull(cache::Cache &cache, const cache::TuningKey &key,
                  const std::vector<ScheduleKnob> &knobs,
                  const std::vector<ScheduleOptions> &viable,
                  const ScheduleOptions &start, size_t budget);

} // namespace lina

#endif // LINA_AUTOTUNE_TUNER_H
