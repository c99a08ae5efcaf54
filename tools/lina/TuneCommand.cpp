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
// What the tune found is kept in a TuneSummary, which the end of the human
// output, `--json`'s object and `--report`'s page are made from.
//
//===----------------------------------------------------------------------===//
#include "Commands.h"
#include "SpecSource.h"
#include "TuneDecode.h"
#include "TuneProgress.h"
#include "TuneReport.h"
#include "TuneStore.h"
#include "TuneSummary.h"
#include "TuneTrial.h"

#include "lina/Autotune/CostModel.h"
#include "lina/Autotune/KernelLoader.h"
#include "lina/Autotune/SearchSpace.h"
#include "lina/Autotune/Tuner.h"
#include "lina/Reference/Reference.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

namespace lina::cli {

namespace {

/// Twice the L2 of the largest current GPUs (H100/H200: 50-60 MB): rotating
/// over this much data leaves nothing of a call's inputs in L2 for the next.
constexpr size_t kFlushBytes = size_t(128) << 20;
/// Tokens of random data per sequence; longer sequences repeat them
/// (repeatTokens says why).
constexpr int64_t kDistinctTokens = 512;

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
  std::printf("%s\n", store.where().c_str());
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

  DeviceLimits limits;
  bool dryRun = p.has("dry-run"), simulate = p.has("simulate");
  Expected<cuda::Device> device = cuda::queryDevice(0);
  if (device.ok()) {
    limits.sharedMemoryPerBlockOptin = device->sharedMemoryPerBlockOptin;
    limits.sharedMemoryPerSM = device->sharedMemoryPerSM;
    limits.smCount = device->smCount;
    limits.maxThreadsPerBlock = device->maxThreadsPerBlock;
    limits.maxThreadsPerSM = device->maxThreadsPerSM;
    limits.registersPerBlock = device->registersPerBlock;
    limits.registersPerSM = device->registersPerSM;
    limits.arch = device->arch;
  } else if (!dryRun && !simulate) {
    throw std::runtime_error(device.message() +
                             " ('lina tune --dry-run' lists the candidates "
                             "without a GPU)");
  }
  bool onDevice = device.ok() && !simulate;
  std::vector<SpaceCandidate> space = enumerateCandidates(spec, limits);
  std::vector<ScheduleOptions> viable;
  std::vector<int64_t> sharedOf, threadsOf;
  for (const SpaceCandidate &c : space)
    if (c.viable()) {
      viable.push_back(c.schedule);
      sharedOf.push_back(c.sharedBytes);
      threadsOf.push_back(c.threads);
    }
  if (!json)
    std::printf("%s at B=%lld T=%lld H=%lld HV=%lld: %zu candidates, %zu "
                "viable (limits: %lld bytes of shared memory%s)\n",
                spec.name.c_str(), (long long)shape.batch,
                (long long)shape.seqLen, (long long)spec.heads,
                (long long)spec.valueHeads, space.size(), viable.size(),
                (long long)limits.sharedMemoryPerBlockOptin,
                onDevice   ? (", " + device->name).c_str()
                : simulate ? ", simulated"
                           : ", assumed H200");
  TuneTarget target =
      tuneTarget(onDevice ? &*device : nullptr, simulate, limits.smCount);
  const GpuIdentity &gpu = target.gpu;
  const std::string &nvrtc = target.nvrtc;
  // What kernels of this shape use when nothing is tuned: the loader's
  // default for the grid.
  ScheduleOptions start =
      defaultSchedule(spec, shape.batch, limits.smCount, shape.seqLen,
                      gpu.arch);
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

  TuneStore store = TuneStore::open();
  cache::Cache *db = store.db;
  cache::TuningKey key =
      makeTuningKey(spec, gpu, nvrtc, shape.batch, shape.seqLen);
  summary.key = key.digest();
  summary.bucket = key.shapeBucket;
  summary.nvrtc = nvrtc;

  TuneProgress progress(mode == "full" ? viable.size()
                                       : std::min(budget, viable.size()),
                        34, p.has("quiet"));
  TuneConfig config;
  // Which candidates this run looks at, and which of them it read back.
  std::vector<std::pair<cache::Schedule, bool>> looked;
  config.progress = [&](const TuneEvent &e) {
    looked.emplace_back(e.candidate->schedule, e.recorded);
    reportProgress(progress, e);
  };
  config.maxNewTrials = p.getInt("stop-after", 1, 1000000, 0);
  std::unique_ptr<RotatingInputs> inputs;
  std::unique_ptr<GpuTrials> trials;
  if (onDevice) {
    // One random problem at the tuned shape, uploaded once for every
    // candidate (the layouts depend on the spec only), when the first
    // candidate needs it.
    auto makeInputs = [&]() -> Expected<const RotatingInputs *> {
      if (!inputs) {
        std::mt19937_64 rng(11);
        int64_t smallLen = std::min<int64_t>(shape.seqLen, kDistinctTokens);
        reference::Problem problem =
            reference::randomProblem(spec, shape.batch, smallLen, rng);
        reference::HostInputs host =
            repeatTokens(spec, reference::encodeProblem(problem), shape.batch,
                         smallLen, shape.seqLen);
        Expected<RotatingInputs> uploaded = RotatingInputs::upload(
            spec, shape.batch, shape.seqLen, host, 0, kFlushBytes);
        if (!uploaded.ok())
          return uploaded.status();
        inputs = std::make_unique<RotatingInputs>(std::move(*uploaded));
      }
      return inputs.get();
    };
    TrialSettings settings;
    settings.repeats = p.getInt("repeat", 1, 1000, 10);
    settings.warmup = p.getInt("warmup", 0, 1000, 3);
    settings.jobs = p.getInt("jobs", 1, 256,
                             std::max(1u, std::thread::hardware_concurrency()));
    trials = std::make_unique<GpuTrials>(spec, limits,
                                         BuildTarget{device->arch, nvrtc},
                                         processCache(), settings, makeInputs);
    config.trial = [&](const ScheduleOptions &s) { return trials->trial(s); };
    config.stop = [&] { return trials->contextLost(); };
    config.prepare = [&, jobs = settings.jobs](
                         const std::vector<ScheduleOptions> &batch) {
      // A full sweep builds its whole space before the first trial, which
      // takes minutes without a line; fast's batches are a knob's few
      // neighbours.
      if (mode == "full")
        progress.note("building " + std::to_string(batch.size()) +
                      " candidates (" + std::to_string(jobs) +
                      " compiles at a time)...");
      trials->prepare(batch);
    };
  } else {
    config.trial = [&](const ScheduleOptions &s) {
      size_t i = 0;
      while (!sameSchedule(viable[i], s))
        ++i;
      cache::Candidate c;
      c.timeMs = modelMilliseconds(spec, s, shape.batch, shape.seqLen, limits,
                                   sharedOf[i], threadsOf[i]);
      return c;
    };
  }

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
  auto begin = std::chrono::steady_clock::now();
  std::vector<ScheduleKnob> knobs = scheduleKnobs(spec);
  TuneResult result =
      mode == "full" ? tuneFull(*db, key, viable, config)
                     : tuneFast(*db, key, knobs, viable, start, budget, config);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
          .count();
  // An earlier run may have recorded something faster than this one saw;
  // the runtime takes the fastest recorded.
  std::optional<cache::Candidate> winner =
      db->best(key, storedScheduleProblem);
  // Also the family's result (tuningFamily): calls whose spec differs only
  // in flags find it when they have no tune of their own.
  if (winner)
    db->recordCandidate(makeTuningKey(tuningFamily(spec), gpu, nvrtc,
                                      shape.batch, shape.seqLen),
                        *winner);
  summary.result = result;
  summary.seconds = seconds;
  addRecorded(summary.rows, db->candidates(key), winner);
  for (TuneRow &row : summary.rows)
    for (const auto &[schedule, recorded] : looked)
      if (toCacheSchedule(row.schedule) == schedule) {
        row.lookedAt = true;
        row.recordedEarlier = recorded;
      }
  summary.fastVsFull =
      compareFastToFull(*db, key, knobs, viable, start, budget);
  summary.cachePath = store.memory ? "" : db->path();
  summary.notSavedReason = store.memory
                               ? "LINA_CACHE is off: kept in memory only"
                               : TuneStore::notSaved();
  summary.saved = summary.notSavedReason.empty();
  if (trials && trials->contextLost())
    summary.error = "a candidate's fault broke the GPU context (it is "
                    "recorded as a launch error); run the same 'lina tune' "
                    "again to resume in a new process";
  else if (!result.best)
    summary.error = "no candidate compiled, matched the reference and ran";

  // Written first, so that the JSON can say whether it was; a tune that
  // found no winner is worth drawing too.
  if (!reportPath.empty()) {
    summary.reportPath = reportPath;
    summary.reportError = writeTuneReport(reportPath, summary);
  }
  if (json)
    printJson(summary);
  else
    printHuman(summary, *db, key, start, p.has("compare"), store);
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
