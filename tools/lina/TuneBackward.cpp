//===- TuneBackward.cpp - lina tune --backward -------------------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "TuneBackward.h"
#include "TuneProgress.h"
#include "TuneSaved.h"

#include "lina/Autotune/BackwardTuneSession.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <thread>

namespace lina::cli {

namespace {

/// Schedule names are at most "C128 tv128 w8".
constexpr int kNameWidth = 14;

std::string timeText(const cache::Candidate &c) {
  if (c.status == cache::CandidateStatus::Ok && c.timeMs) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4f ms", *c.timeMs);
    return buf;
  }
  return cache::toString(c.status);
}

std::string firstLine(const std::string &text, size_t max) {
  std::string line = text.substr(0, text.find('\n'));
  return line.size() > max ? line.substr(0, max) + "..." : line;
}

std::string nameOf(const cache::Schedule &s) {
  std::optional<BackwardScheduleOptions> b = backwardFromCacheSchedule(s);
  return b ? describe(*b) : s.str();
}

void reportProgress(TuneProgress &progress, const TuneEvent &e) {
  const cache::Candidate &c = *e.candidate;
  std::string note;
  auto add = [&](const std::string &part) {
    note += (note.empty() ? "" : "; ") + part;
  };
  if (e.recorded)
    add("recorded earlier");
  if (c.status != cache::CandidateStatus::Ok && !c.error.empty())
    add(firstLine(c.error, 60));
  else if (e.best && e.best->schedule == c.schedule)
    add("best so far");
  progress.candidate(e.index, nameOf(c.schedule), timeText(c), !e.recorded,
                     note);
}

/// Every recorded candidate of the key, fastest first, marking the default;
/// then what was looked at, the best, the default's time, where.
void printEnd(BackwardTuneSession &session, const BackwardTuneOutcome &out,
              const std::string &mode, size_t budget, bool compare) {
  cache::Cache &db = session.cache();
  const cache::TuningKey &key = session.key();
  cache::Schedule fallback = toCacheSchedule(session.start());
  std::printf("\n%-4s %-*s %-14s %s\n", "rank", kNameWidth, "schedule", "time",
              "note");
  size_t rank = 0;
  std::optional<cache::Candidate> atDefault;
  for (const cache::Candidate &c : db.candidates(key)) {
    bool ok = c.status == cache::CandidateStatus::Ok;
    bool isDefault = c.schedule == fallback;
    if (isDefault && ok && c.timeMs)
      atDefault = c;
    std::string note = isDefault ? "default" : "";
    if (!ok)
      note += (note.empty() ? "" : "; ") + firstLine(c.error, 70);
    std::printf("%-4s %-*s %-14s %s\n",
                ok ? std::to_string(++rank).c_str() : "-", kNameWidth,
                nameOf(c.schedule).c_str(), timeText(c).c_str(), note.c_str());
  }
  const BackwardTuneResult &r = out.result;
  std::printf("\n%s: looked at %zu candidates (%zu tried now, %zu recorded "
              "earlier) in %.1f s%s\n",
              mode.c_str(), r.looked, r.tried, r.recorded, out.seconds,
              r.finished ? "" : "; stopped early, run again to resume");
  if (!out.error.empty() || !r.best)
    return;
  std::printf("best: %s, %s\n", nameOf(r.best->schedule).c_str(),
              timeText(*r.best).c_str());
  if (out.winner && out.winner->schedule != r.best->schedule)
    std::printf("fastest recorded (what backward kernels for this bucket "
                "use): %s, %s\n",
                nameOf(out.winner->schedule).c_str(),
                timeText(*out.winner).c_str());
  if (atDefault)
    std::printf("default: %s, %s (best is %.2fx faster)\n",
                describe(session.start()).c_str(),
                timeText(*atDefault).c_str(),
                *atDefault->timeMs / *r.best->timeMs);
  // Once a full sweep is recorded, fast's walk replays on its times.
  if (std::optional<FastVsFull> cmp = compareBackwardFastToFull(
          db, key, session.knobs(), session.viable(), session.start(), budget))
    std::printf("fast vs full: fast picks %s (%s) after %zu of %zu "
                "candidates; full's best %s (%s): fast is %.1f%% slower\n",
                nameOf(cmp->fast.schedule).c_str(),
                timeText(cmp->fast).c_str(), cmp->fastLooked, cmp->viable,
                nameOf(cmp->full.schedule).c_str(),
                timeText(cmp->full).c_str(), (cmp->ratio - 1) * 100);
  else if (compare)
    std::printf("fast vs full: not known yet; run --mode full to the end "
                "first\n");
  std::printf("%s\n", recordedWhere(session.store()).c_str());
}

} // namespace

int tuneBackward(const ArgParser &p, const Spec &spec,
                 const ProblemShape &shape, const std::string &mode,
                 size_t budget) {
  for (const char *option : {"json", "report", "decode"})
    if (p.has(option))
      throw UsageError(std::string("--") + option +
                       " is not for --backward (the backward's tune prints "
                       "its table and progress lines only)");
  bool dryRun = p.has("dry-run"), simulate = p.has("simulate");
  TuneRequest request;
  request.batch = shape.batch;
  request.seqLen = shape.seqLen;
  request.mode = mode == "full" ? TuneMode::Full : TuneMode::Fast;
  request.budget = budget;
  request.simulate = simulate;
  request.dryRun = dryRun;
  if (!dryRun)
    request.maxNewTrials = p.getInt("stop-after", 1, 1000000, 0);
  if (!dryRun && !simulate) {
    request.repeats = p.getInt("repeat", 1, 1000, 10);
    request.warmup = p.getInt("warmup", 0, 1000, 3);
    request.jobs = p.getInt("jobs", 1, 256,
                            std::max(1u, std::thread::hardware_concurrency()));
  }
  std::optional<TuneProgress> progress;
  request.progress = [&](const TuneEvent &e) { reportProgress(*progress, e); };
  request.note = [&](const std::string &text) { progress->note(text); };
  Expected<BackwardTuneSession> opened =
      BackwardTuneSession::open(spec, request);
  if (!opened.ok()) {
    if (opened.status().code() == StatusCode::InvalidArgument)
      throw UsageError(opened.message());
    throw std::runtime_error(opened.message() +
                             " ('lina tune --backward --dry-run' lists the "
                             "candidates without a GPU)");
  }
  BackwardTuneSession &session = *opened;
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
    for (const BackwardSpaceCandidate &c : space)
      std::printf("  %-*s %8lld B  %s\n", kNameWidth,
                  describe(c.schedule).c_str(), (long long)c.sharedBytes,
                  c.viable() ? "viable" : ("pruned: " + c.pruned).c_str());
    return 0;
  }
  if (viable.empty())
    throw std::runtime_error("no viable backward schedule: every one was "
                             "pruned ('lina tune --backward --dry-run' says "
                             "why)");
  const cache::TuningKey &key = session.key();
  std::printf("%s mode: %s; tuning key %.16s (bucket %s)\n", mode.c_str(),
              mode == "full"
                  ? ("all " + std::to_string(viable.size()) +
                     " viable candidates")
                        .c_str()
                  : ("coordinate descent from " + describe(session.start()) +
                     " (the default), at most " + std::to_string(budget) +
                     " candidates")
                        .c_str(),
              key.digest().c_str(), key.shapeBucket.c_str());
  std::fflush(stdout);
  progress.emplace(mode == "full" ? viable.size()
                                  : std::min(budget, viable.size()),
                   kNameWidth, p.has("quiet"));
  Expected<BackwardTuneOutcome> ran = session.run();
  if (!ran.ok())
    throw std::runtime_error(ran.message());
  printEnd(session, *ran, mode, budget, p.has("compare"));
  if (!ran->error.empty())
    throw std::runtime_error(ran->error);
  return finishTune(0);
}

} // namespace lina::cli
