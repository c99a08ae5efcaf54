//===- TuneCommand.cpp - `lina tune` ----------------------------------===//
//
// Part of lina. Finds the fastest schedule for a spec at a shape and records
// every candidate in the cache, where the runtime (C/C++ API, `lina run`)
// finds the winner for the shape's bucket. `--mode full` tries every viable
// candidate; `--mode fast` walks from the heuristic default one knob at a
// time and tries only a few. A killed tune resumes: what is recorded is not
// tried again. `--dry-run` lists the space without a GPU; `--simulate` runs
// the whole tune on the cost model instead of a GPU (for tests and to
// preview), recorded under a GPU named "simulated" that no device matches.
// The tune itself is a TuneSession (the autotune library's, which the C API
// and Python call too); this file reads the options and prints. What the
// tune found is kept in a TuneSummary, which the end of the human output,
// `--json`'s object and `--report`'s page are made from. `--backward` and
// `--decode` tune those kernels instead (TuneBackward.h, TuneDecode.h).
//
//===----------------------------------------------------------------------===//
#include "Commands.h"
#include "SpecSource.h"
#include "TuneBackward.h"
#include "TuneDecode.h"
#include "TuneProgress.h"
#include "TuneReport.h"
#include "TuneSaved.h"
#include "TuneSummary.h"

#include "lina/Autotune/ScheduleKnobs.h"
#include "lina/Autotune/TuneSession.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <thread>

namespace lina::cli {

namespace {

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

/// A candidate's progress line, through `progress`.
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
  progress.candidate(e.index, describe(fromCacheSchedule(c.schedule)),
                     timeText(c), !e.recorded, note);
}

void printJson(const TuneSummary &summary) {
  llvm::outs() << llvm::formatv("{0:2}", llvm::json::Value(tuneToJson(summary)))
               << "\n";
  llvm::outs().flush();
}

/// Every recorded candidate of the key, fastest first, marking the default.
void printTable(cache::Cache &db, const cache::TuningKey &key,
                const ScheduleOptions &fallback) {
  std::vector<cache::Candidate> all = db.candidates(key);
  std::printf("\n%-4s %-34s %-14s %s\n", "rank", "schedule", "time", "note");
  size_t rank = 0;
  for (const cache::Candidate &c : all) {
    ScheduleOptions s = fromCacheSchedule(c.schedule);
    bool ok = c.status == cache::CandidateStatus::Ok;
    std::string note = sameSchedule(s, fallback) ? "default" : "";
    if (!ok)
      note += (note.empty() ? "" : "; ") + firstLine(c.error, 70);
    std::printf("%-4s %-34s %-14s %s\n",
                ok ? std::to_string(++rank).c_str() : "-", describe(s).c_str(),
                timeText(c).c_str(), note.c_str());
  }
}

/// The human form of the end of a tune: the table of recorded candidates,
/// what was looked at, the best, the default, fast vs full, where.
void printHuman(const TuneSummary &summary, cache::Cache &db,
                const cache::TuningKey &key, const ScheduleOptions &start,
                bool compare, const TuneStore &store) {
  const TuneResult &result = summary.result;
  printTable(db, key, start);
  std::printf("\n%s: looked at %zu candidates (%zu tried now, %zu recorded "
              "earlier) in %.1f s%s\n",
              summary.mode.c_str(), result.looked, result.tried,
              result.recorded, summary.seconds,
              result.finished ? "" : "; stopped early, run again to resume");
  if (!summary.error.empty())
    return;
  std::printf("best: %s, %s\n",
              describe(fromCacheSchedule(result.best->schedule)).c_str(),
              timeText(*result.best).c_str());
  std::optional<cache::Candidate> winner = db.best(key, storedScheduleProblem);
  if (winner && winner->schedule != result.best->schedule)
    std::printf("fastest recorded (what kernels for this bucket use): %s, "
                "%s\n",
                describe(fromCacheSchedule(winner->schedule)).c_str(),
                timeText(*winner).c_str());
  for (const cache::Candidate &c : db.candidates(key))
    if (sameSchedule(fromCacheSchedule(c.schedule), start) &&
        c.status == cache::CandidateStatus::Ok && c.timeMs)
      std::printf("default: %s, %s (best is %.2fx faster)\n",
                  describe(start).c_str(), timeText(c).c_str(),
                  *c.timeMs / *result.best->timeMs);
  if (const std::optional<FastVsFull> &cmp = summary.fastVsFull)
    std::printf("fast vs full: fast picks %s (%s) after %zu of %zu "
                "candidates; full's best %s (%s): fast is %.1f%% slower\n",
                describe(fromCacheSchedule(cmp->fast.schedule)).c_str(),
                timeText(cmp->fast).c_str(), cmp->fastLooked, cmp->viable,
                describe(fromCacheSchedule(cmp->full.schedule)).c_str(),
                timeText(cmp->full).c_str(), (cmp->ratio - 1) * 100);
  else if (compare)
    std::printf("fast vs full: not known yet; run --mode full to the end "
                "first\n");
  std::printf("%s\n", recordedWhere(store).c_str());
  if (!summary.reportPath.empty() && summary.reportError.empty())
    std::printf("report in %s\n", summary.reportPath.c_str());
}

} // namespace

int tuneCommand(const std::vector<std::string> &args) {
  ArgParser p("tune", "<preset|file.mlir> --shape B,T,H[,HV] [options]",
              "Find the fastest schedule for a spec at a shape on this GPU "
              "and record every candidate\nin lina's cache, where kernels "
              "made for shapes of the same bucket find it. Each\ncandidate "
              "is compiled, checked against the float64 reference, then "
              "timed. A killed\ntune resumes where it stopped.");
  addShapeOption(p);
  p.option("mode", "fast|full",
           "fast: coordinate descent from the default schedule, at most "
           "--budget candidates; full: every viable candidate",
           "fast");
  p.option("budget", "N", "fast: the most candidates to try", "12");
  p.flag("compare", "also report how close fast gets to full (from recorded "
                    "times; needs a finished full run)");
  p.flag("backward", "tune the backward's kernels instead (training; "
                     "chunk size, tile-v, warps)");
  p.flag("decode", "tune the decode kernel instead: T in --shape is the "
                   "tokens per call (1-16), every schedule is tried");
  p.flag("dry-run", "list the candidate space and the pruning; no GPU needed");
  p.flag("simulate", "time candidates with the cost model instead of the "
                     "GPU (recorded under GPU 'simulated'); no GPU needed");
  p.option("repeat", "N",
           "timed calls per candidate (median; 50 with --decode)", "10");
  p.option("warmup", "N", "untimed calls before timing (10 with --decode)",
           "3");
  p.option("jobs", "N", "parallel compiles (default: CPU cores)");
  p.option("stop-after", "N",
           "stop after N new candidates, as if killed (to test resuming)");
  p.flag("json", "print the whole result as one JSON object (progress "
                 "stays on stderr)");
  p.flag("quiet", "no progress lines on stderr (errors and warnings stay)");
  p.option("report", "FILE.html",
           "also write a self-contained HTML page that plots every "
           "candidate's time and lists them all");
  addSpecOverrideOptions(p);
  if (!p.parse(args))
    return 0;
  if (p.positional().size() != 1)
    throw UsageError("expected one preset name or spec file");
  ProblemShape shape = parseShapeOption(p);
  // A tune times calls of T tokens: with none there is nothing to time, and
  // its results would be recorded for the t=1..256 bucket all the same.
  if (shape.seqLen < 1)
    throw UsageError("--shape: a tune needs T of at least 1, got " +
                     std::to_string(shape.seqLen));
  std::string mode = p.get("mode");
  if (mode != "fast" && mode != "full")
    throw UsageError("--mode must be fast or full, got '" + mode + "'");
  size_t budget = p.getInt("budget", 1, 100000, 12);
  Spec spec = loadSpec(p.positional().front(), p);
  spec.heads = shape.heads;
  spec.valueHeads = shape.valueHeads;
  std::vector<std::string> errors = validate(spec);
  if (!errors.empty())
    throw UsageError("invalid spec: " + errors.front());
  bool json = p.has("json");
  std::string reportPath = p.get("report");
  if (p.has("backward"))
    return tuneBackward(p, spec, shape, mode, budget);
  if (p.has("decode")) {
    for (const char *option : {"json", "report"})
      if (p.has(option))
        throw UsageError(std::string("--") + option +
                         " is for the chunk kernel's tune, not --decode");
    return finishTune(tuneDecode(p, spec, shape));
  }
  if (p.has("report")) {
    if (p.has("dry-run"))
      throw UsageError("--report draws a tune's times; --dry-run has none");
    // Before the tune, which may take an hour: not after it.
    std::string problem = reportPathProblem(reportPath);
    if (!problem.empty())
      throw std::runtime_error("cannot write the report " + reportPath + ": " +
                               problem);
  }

  bool dryRun = p.has("dry-run"), simulate = p.has("simulate");
  TuneRequest request;
  request.batch = shape.batch;
  request.seqLen = shape.seqLen;
  request.mode = mode == "full" ? TuneMode::Full : TuneMode::Fast;
  request.budget = budget;
  request.simulate = simulate;
  request.dryRun = dryRun;
  // Read only where they matter, so that a dry run or a simulated tune is
  // not refused for a timing option it would ignore.
  if (!dryRun)
    request.maxNewTrials = p.getInt("stop-after", 1, 1000000, 0);
  if (!dryRun && !simulate) {
    request.repeats = p.getInt("repeat", 1, 1000, 10);
    request.warmup = p.getInt("warmup", 0, 1000, 3);
    request.jobs = p.getInt("jobs", 1, 256,
                            std::max(1u, std::thread::hardware_concurrency()));
  }
  // The progress lines need the number of viable candidates, known once the
  // session is open.
  std::optional<TuneProgress> progress;
  request.progress = [&](const TuneEvent &e) { reportProgress(*progress, e); };
  request.note = [&](const std::string &text) { progress->note(text); };
  Expected<TuneSession> opened = TuneSession::open(spec, request);
  if (!opened.ok()) {
    if (opened.status().code() == StatusCode::InvalidArgument)
      throw UsageError(opened.message());
    throw std::runtime_error(opened.message() +
                             " ('lina tune --dry-run' lists the candidates "
                             "without a GPU)");
  }
  TuneSession &session = *opened;
  const DeviceLimits &limits = session.limits();
  const std::vector<SpaceCandidate> &space = session.space();
  const std::vector<ScheduleOptions> &viable = session.viable();
  bool onDevice = session.onDevice();
  if (!json)
    std::printf("%s at B=%lld T=%lld H=%lld HV=%lld: %zu candidates, %zu "
                "viable (limits: %lld bytes of shared memory%s)\n",
                spec.name.c_str(), (long long)shape.batch,
                (long long)shape.seqLen, (long long)spec.heads,
                (long long)spec.valueHeads, space.size(), viable.size(),
                (long long)limits.sharedMemoryPerBlockOptin,
                onDevice   ? (", " + session.device()->name).c_str()
                : simulate ? ", simulated"
                           : ", assumed H200");
  const GpuIdentity &gpu = session.gpu();
  const ScheduleOptions &start = session.start();
  TuneSummary summary;
  summary.spec = spec;
  summary.shape = shape;
  summary.gpu = onDevice || simulate ? gpu : GpuIdentity{"", limits.arch,
                                                          limits.smCount, ""};
  summary.simulated = simulate;
  summary.sharedMemoryLimit = limits.sharedMemoryPerBlockOptin;
  summary.mode = dryRun ? "dry-run" : mode;
  summary.budget = budget;
  summary.rows = spaceRows(space, start);
  summary.defaultName = describe(start);
  if (dryRun) {
    if (json) {
      printJson(summary);
      return 0;
    }
    for (const SpaceCandidate &c : space)
      std::printf("  %-34s %8lld B  %s\n", describe(c.schedule).c_str(),
                  (long long)c.sharedBytes,
                  c.viable() ? "viable" : ("pruned: " + c.pruned).c_str());
    return 0;
  }
  if (viable.empty())
    throw std::runtime_error("no viable candidate: every schedule was pruned "
                             "('lina tune --dry-run' says why)");

  cache::Cache *db = &session.cache();
  const cache::TuningKey &key = session.key();
  summary.key = key.digest();
  summary.bucket = key.shapeBucket;
  summary.nvrtc = session.nvrtcVersion();

  progress.emplace(mode == "full" ? viable.size()
                                  : std::min(budget, viable.size()),
                   34, p.has("quiet"));

  if (!json) {
    std::printf("%s mode: %s; tuning key %.16s (bucket %s)\n", mode.c_str(),
                mode == "full" ? ("all " + std::to_string(viable.size()) +
                                  " viable "
                                  "candidates")
                                     .c_str()
                               : ("coordinate descent from " +
                                  describe(start) + " (the default), at most " +
                                  std::to_string(budget) + " candidates")
                                     .c_str(),
                key.digest().c_str(), key.shapeBucket.c_str());
    std::fflush(stdout);
  }
  Expected<TuneOutcome> ran = session.run();
  if (!ran.ok())
    throw std::runtime_error(ran.message());
  const TuneOutcome &outcome = *ran;
  summary.result = outcome.result;
  summary.seconds = outcome.seconds;
  addRecorded(summary.rows, db->candidates(key), outcome.winner);
  for (TuneRow &row : summary.rows)
    for (const TuneVisit &visit : outcome.visited)
      if (toCacheSchedule(row.schedule) == visit.candidate.schedule) {
        row.lookedAt = true;
        row.recordedEarlier = visit.recorded;
      }
  summary.fastVsFull =
      compareFastToFull(*db, key, session.knobs(), viable, start, budget);
  summary.cachePath = outcome.cachePath;
  summary.notSavedReason = outcome.notSavedReason;
  summary.saved = outcome.saved;
  if (outcome.contextLost)
    summary.error = "a candidate's fault broke the GPU context (it is "
                    "recorded as a launch error); run the same 'lina tune' "
                    "again to resume in a new process";
  else
    summary.error = outcome.error;

  // Written first, so that the JSON can say whether it was; a tune that
  // found no winner is worth drawing too.
  if (!reportPath.empty()) {
    summary.reportPath = reportPath;
    summary.reportError = writeTuneReport(reportPath, summary);
  }
  if (json)
    printJson(summary);
  else
    printHuman(summary, *db, key, start, p.has("compare"),
               session.store());
  std::string failure = summary.error;
  if (!summary.reportError.empty())
    failure += (failure.empty() ? "" : "; and ") + std::string("cannot write ") +
               "the report " + reportPath + ": " + summary.reportError;
  if (!summary.error.empty())
    throw std::runtime_error(failure);
  int status = finishTune(0);
  if (!failure.empty())
    throw std::runtime_error(failure);
  return status;
}

} // namespace lina::cli
