//===- TuneBackward.cpp - lina tune --backward -------------------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "TuneBackward.h"
#include "TuneCandidateText.h"
#include "TuneHumanText.h"
#include "TuneProgress.h"
#include "TuneRequestOptions.h"
#include "TuneSaved.h"

#include "lina/Autotune/BackwardTuneSession.h"

#include <algorithm>
#include <cstdio>
#include <optional>

namespace lina::cli {

template <> struct TuneNaming<BackwardTune> {
  /// Schedule names are at most "C128 tv128 w8".
  static constexpr int kNameWidth = 14;
  static constexpr const char *kKernels = "backward kernels";
  /// A row no backward tune records is named as the cache holds it.
  static std::string name(const cache::Schedule &s) {
    std::optional<BackwardScheduleOptions> b = backwardFromCacheSchedule(s);
    return b ? describe(*b) : s.str();
  }
  static bool isDefault(const cache::Schedule &s,
                        const BackwardScheduleOptions &start) {
    return s == toCacheSchedule(start);
  }
};

int tuneBackward(const ArgParser &p, const Spec &spec,
                 const ProblemShape &shape, const std::string &mode,
                 size_t budget) {
  using Naming = TuneNaming<BackwardTune>;
  for (const char *option : {"json", "report", "decode"})
    if (p.has(option))
      throw UsageError(std::string("--") + option +
                       " is not for --backward (the backward's tune prints "
                       "its table and progress lines only)");
  bool dryRun = p.has("dry-run"), simulate = p.has("simulate");
  TuneRequest request = tuneRequestFromOptions(p, shape, mode, budget);
  std::optional<TuneProgress> progress;
  request.progress = [&](const TuneEvent &e) {
    reportProgress(*progress, e, Naming::name(e.candidate->schedule));
  };
  request.note = [&](const std::string &text) { progress->note(text); };
  BackwardTuneSession session = openTuneSession<BackwardTune>(
      spec, request, "lina tune --backward --dry-run");
  const std::vector<BackwardSpaceCandidate> &space = session.space();
  const std::vector<BackwardScheduleOptions> &viable = session.viable();
  const DeviceLimits &limits = session.limits();
  std::printf("%s backward at B=%lld T=%lld H=%lld HV=%lld: %zu candidates, "
              "%zu viable (limits: %lld bytes of shared memory%s); the "
              "default is %s\n",
              spec.name.c_str(), (long long)shape.batch,
              (long long)shape.seqLen, (long long)spec.heads,
              (long long)spec.valueHeads, space.size(), viable.size(),
              (long long)limits.sharedMemoryPerBlockOptin,
              session.onDevice() ? (", " + session.gpu().name).c_str()
              : simulate         ? ", simulated"
                                 : ", assumed H200",
              describe(session.start()).c_str());
  if (dryRun) {
    printSpace<BackwardTune>(space);
    return 0;
  }
  if (viable.empty())
    throw std::runtime_error("no viable backward schedule: every one was "
                             "pruned ('lina tune --backward --dry-run' says "
                             "why)");
  printModeLine(mode, viable.size(), describe(session.start()), budget,
                session.key());
  progress.emplace(mode == "full" ? viable.size()
                                  : std::min(budget, viable.size()),
                   Naming::kNameWidth, p.has("quiet"));
  Expected<BackwardTuneOutcome> ran = session.run();
  if (!ran.ok())
    throw std::runtime_error(ran.message());
  // Once a full sweep is recorded, fast's walk replays on its times.
  std::optional<FastVsFull> fastVsFull = compareBackwardFastToFull(
      session.cache(), session.key(), session.knobs(), viable,
      session.start(), budget);
  printTuneEnd(session, *ran, mode, fastVsFull, p.has("compare"));
  if (!ran->error.empty())
    throw std::runtime_error(ran->error);
  return finishTune(0);
}

} // namespace lina::cli
