//===- TuneHumanText.h - A tune's human output, for any kernel --*- C++ -*-===//
//
// Part of lina. What `lina tune` prints on stdout around a chunk kernel's
// tune (TuneCommand.cpp) and a backward's (TuneBackward.cpp): the dry
// run's listing of the space, the line saying what the mode will look at,
// the table of recorded candidates and the end (the counts, the best, the
// winner, the default, fast against full, where it was recorded). The two
// printed the same lines from two copies; now they differ only where a
// kind's TuneNaming says, so a change to the output reaches both.
//
// A kind's TuneNaming (specialized where the kind's command is) holds:
//   kNameWidth           the widest schedule name, for the columns
//   name(schedule)       how a recorded (cache) schedule is named
//   isDefault(s, start)  whether recorded schedule `s` is the start
//   kKernels             what uses the winner ("kernels", "backward
//                        kernels")
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TOOLS_TUNEHUMANTEXT_H
#define LINA_TOOLS_TUNEHUMANTEXT_H

#include "TuneCandidateText.h"
#include "TuneSaved.h"

#include "lina/Autotune/BasicTuneSession.h"

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace lina::cli {

template <typename Kind> struct TuneNaming;

/// --dry-run's listing: every candidate of the space with its planned
/// shared memory, viable or pruned with the reason.
template <typename Kind>
void printSpace(const std::vector<typename Kind::Candidate> &space) {
  for (const typename Kind::Candidate &c : space)
    std::printf("  %-*s %8lld B  %s\n", TuneNaming<Kind>::kNameWidth,
                describe(c.schedule).c_str(), (long long)c.sharedBytes,
                c.viable() ? "viable" : ("pruned: " + c.pruned).c_str());
}

/// What the mode will look at and under which key; flushed, as the tune
/// that follows may take an hour.
inline void printModeLine(const std::string &mode, size_t viable,
                          const std::string &startName, size_t budget,
                          const cache::TuningKey &key) {
  std::printf("%s mode: %s; tuning key %.16s (bucket %s)\n", mode.c_str(),
              mode == "full"
                  ? ("all " + std::to_string(viable) + " viable candidates")
                        .c_str()
                  : ("coordinate descent from " + startName +
                     " (the default), at most " + std::to_string(budget) +
                     " candidates")
                        .c_str(),
              key.digest().c_str(), key.shapeBucket.c_str());
  std::fflush(stdout);
}

/// Every recorded candidate of the key, fastest first, marking the default.
template <typename Kind>
void printRecorded(const std::vector<cache::Candidate> &recorded,
                   const typename Kind::Schedule &start) {
  using Naming = TuneNaming<Kind>;
  std::printf("\n%-4s %-*s %-14s %s\n", "rank", Naming::kNameWidth,
              "schedule", "time", "note");
  size_t rank = 0;
  for (const cache::Candidate &c : recorded) {
    bool ok = c.status == cache::CandidateStatus::Ok;
    std::string note = Naming::isDefault(c.schedule, start) ? "default" : "";
    if (!ok)
      note += (note.empty() ? "" : "; ") + firstLine(c.error, 70);
    std::printf("%-4s %-*s %-14s %s\n",
                ok ? std::to_string(++rank).c_str() : "-", Naming::kNameWidth,
                Naming::name(c.schedule).c_str(), timeText(c).c_str(),
                note.c_str());
  }
}

/// The end of a tune's human output: the table of what the key holds, what
/// this run looked at, then, unless it failed, its best, the fastest
/// recorded where that is another, the default's time, fast against full
/// (or why not yet, with `compare`) and where it was recorded. Returns
/// whether it got that far.
template <typename Kind>
bool printTuneEnd(BasicTuneSession<Kind> &session,
                  const BasicTuneOutcome<typename Kind::Schedule> &outcome,
                  const std::string &mode,
                  const std::optional<FastVsFull> &fastVsFull, bool compare) {
  using Naming = TuneNaming<Kind>;
  std::vector<cache::Candidate> recorded =
      session.cache().candidates(session.key());
  printRecorded<Kind>(recorded, session.start());
  const BasicTuneResult<typename Kind::Schedule> &r = outcome.result;
  std::printf("\n%s: looked at %zu candidates (%zu tried now, %zu recorded "
              "earlier) in %.1f s%s\n",
              mode.c_str(), r.looked, r.tried, r.recorded, outcome.seconds,
              r.finished ? "" : "; stopped early, run again to resume");
  if (!outcome.error.empty() || !r.best)
    return false;
  std::printf("best: %s, %s\n", Naming::name(r.best->schedule).c_str(),
              timeText(*r.best).c_str());
  if (outcome.winner && outcome.winner->schedule != r.best->schedule)
    std::printf("fastest recorded (what %s for this bucket use): %s, %s\n",
                Naming::kKernels, Naming::name(outcome.winner->schedule).c_str(),
                timeText(*outcome.winner).c_str());
  for (const cache::Candidate &c : recorded)
    if (Naming::isDefault(c.schedule, session.start()) &&
        c.status == cache::CandidateStatus::Ok && c.timeMs)
      std::printf("default: %s, %s (best is %.2fx faster)\n",
                  describe(session.start()).c_str(), timeText(c).c_str(),
                  *c.timeMs / *r.best->timeMs);
  if (fastVsFull)
    std::printf("fast vs full: fast picks %s (%s) after %zu of %zu "
                "candidates; full's best %s (%s): fast is %.1f%% slower\n",
                Naming::name(fastVsFull->fast.schedule).c_str(),
                timeText(fastVsFull->fast).c_str(), fastVsFull->fastLooked,
                fastVsFull->viable,
                Naming::name(fastVsFull->full.schedule).c_str(),
                timeText(fastVsFull->full).c_str(),
                (fastVsFull->ratio - 1) * 100);
  else if (compare)
    std::printf("fast vs full: not known yet; run --mode full to the end "
                "first\n");
  std::printf("%s\n", recordedWhere(session.store()).c_str());
  return true;
}

} // namespace lina::cli

#endif // LINA_TOOLS_TUNEHUMANTEXT_H
