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
#include "TuneCandidateText.h"
#include "TuneDecode.h"
#include "TuneHumanText.h"
#include "TuneProgress.h"
#include "TuneReport.h"
#include "TuneRequestOptions.h"
#include "TuneSaved.h"
#include "TuneSummary.h"

#include "lina/Autotune/ScheduleKnobs.h"
#include "lina/Autotune/TuneSession.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdio>
#include <optional>

namespace lina::cli {

template <> struct TuneNaming<ForwardTune> {
  /// Wide enough for the longest names, as "C64 tv128 w8 fused prefetch
  /// warpgroup".
  static constexpr int kNameWidth = 38;
  static constexpr const char *kKernels = "kernels";
  static std::string name(const cache::Schedule &s) {
    return describe(fromCacheSchedule(s));
  }
  static bool isDefault(const cache::Schedule &s,
                        const ScheduleOptions &start) {
    return sameSchedule(fromCacheSchedule(s), start);
  }
};

namespace {

void printJson(const TuneSummary &summary) {
  llvm::outs() << llvm::formatv("{0:2}", llvm::json::Value(tuneToJson(summary)))
               << "\n";
  llvm::outs().flush();
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
  takeShapeHeads(p, shape, "lina tune", spec);
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
  TuneRequest request = tuneRequestFromOptions(p, shape, mode, budget);
  // The progress lines need the number of viable candidates, known once the
  // session is open.
  std::optional<TuneProgress> progress;
  request.progress = [&](const TuneEvent &e) {
    reportProgress(*progress, e,
                   TuneNaming<ForwardTune>::name(e.candidate->schedule));
  };
  request.note = [&](const std::string &text) { progress->note(text); };
  TuneSession session =
      openTuneSession<ForwardTune>(spec, request, "lina tune --dry-run");
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
    printSpace<ForwardTune>(space);
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
                   TuneNaming<ForwardTune>::kNameWidth, p.has("quiet"));
  if (!json)
    printModeLine(mode, viable.size(), describe(start), budget, key);
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
  else if (printTuneEnd(session, outcome, mode, summary.fastVsFull,
                        p.has("compare")) &&
           !summary.reportPath.empty() && summary.reportError.empty())
    std::printf("report in %s\n", summary.reportPath.c_str());
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
