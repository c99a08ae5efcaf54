//===- TuneSummary.h - What a chunk tune found ------------------*- C++ -*-===//
//
// Part of lina. Everything `lina tune` learns about a spec at a shape, kept
// for the outputs that come after the tune: `--json` prints it as one
// object, `--report` draws it. Every candidate of the space is here, pruned
// ones with the reason, looked-at ones with their recorded result.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TOOLS_TUNESUMMARY_H
#define LINA_TOOLS_TUNESUMMARY_H

#include "SpecSource.h"

#include "lina/Autotune/SearchSpace.h"
#include "lina/Autotune/TunedLookup.h"
#include "lina/Autotune/Tuner.h"

#include "llvm/Support/JSON.h"

#include <optional>
#include <string>
#include <vector>

namespace lina::cli {

struct TuneRow {
  ScheduleOptions schedule;
  std::string name;        ///< describe(schedule)
  int64_t sharedBytes = 0; ///< when it planned
  /// Why the search space prunes it (nothing was tried), else empty.
  std::string pruned;
  /// Its record under the tuning key: this run's or an earlier one's.
  std::optional<cache::Candidate> result;
  bool lookedAt = false;        ///< this run looked at it
  bool recordedEarlier = false; ///< ...and read it from the cache
  bool isDefault = false;       ///< what kernels use when nothing is tuned
  bool isWinner = false;        ///< the fastest recorded: what kernels use

  /// "ok", "pruned" (by the space, or on its registers after compiling),
  /// a failure's status ("compile_error", "mismatch", ...), or "not_tried".
  std::string status() const;
  /// Why it was pruned or failed; empty otherwise.
  std::string reason() const;
  /// Its time when it ran and matched the reference.
  std::optional<double> timeMs() const;
};

struct TuneSummary {
  Spec spec;
  ProblemShape shape;
  std::string key, bucket;
  GpuIdentity gpu;
  bool simulated = false;
  std::string nvrtc;
  int64_t sharedMemoryLimit = 0;
  std::string mode; ///< "fast", "full" or "dry-run"
  size_t budget = 0;
  std::vector<TuneRow> rows; ///< the space, in its order
  std::string defaultName;
  TuneResult result;
  double seconds = 0;
  std::optional<FastVsFull> fastVsFull;
  bool saved = false;
  std::string notSavedReason; ///< why not, when not saved
  std::string cachePath;
  /// Why the tune failed after it ran (no candidate ran, the GPU context
  /// broke); empty when it did not.
  std::string error;
  /// --report's file, and why it could not be written.
  std::string reportPath, reportError;

  /// The winner's row, if any.
  const TuneRow *winner() const;
  const TuneRow *defaultRow() const;
  size_t viable() const;
};

/// The rows of `space`, the default marked, before the tune.
std::vector<TuneRow> spaceRows(const std::vector<SpaceCandidate> &space,
                               const ScheduleOptions &fallback);
/// Fills in what the cache holds for the key: each recorded candidate's
/// result, and which one wins.
void addRecorded(std::vector<TuneRow> &rows,
                 const std::vector<cache::Candidate> &recorded,
                 const std::optional<cache::Candidate> &winner);

/// The summary as one JSON object: "spec", "shape", "bucket", "key", "gpu",
/// "nvrtc", "mode", "budget", "space", "candidates" (every row: "schedule",
/// "status", "time_ms", "reason", "shared_bytes", "looked_at",
/// "recorded_earlier", "default", "winner"), "looked", "tried",
/// "recorded_earlier", "finished", "seconds", "best", "winner", "default",
/// "speedup_over_default", "fast_vs_full", "saved", "not_saved_reason",
/// "cache", "error", "report" (the file, or null without --report) and
/// "report_error".
llvm::json::Object tuneToJson(const TuneSummary &summary);

/// A schedule's fields, under the names of lina-schedule's options.
llvm::json::Object scheduleToJson(const ScheduleOptions &schedule);

} // namespace lina::cli

#endif // LINA_TOOLS_TUNESUMMARY_H
