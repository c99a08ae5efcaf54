//===- Candidate.h - One timed schedule of a tuning run ---------*- C++ -*-===//
//
// Part of lina. The tuner records every candidate it tries, the failures as
// well as the winner: a killed tune resumes by skipping what is recorded, and
// `lina cache show` can explain why a schedule was not picked.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_CANDIDATE_H
#define LINA_AUTOTUNE_CANDIDATE_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lina::cache {

/// The knobs of one kernel configuration (lina-chunk and lina-schedule's
/// options). Candidates of one tuning key are unique by schedule.
struct Schedule {
  int64_t chunkSize = 64;
  int64_t tileV = 64;
  int64_t warps = 4;
  /// "fused" or "materialize" (lina::toString(Strategy)); a string so that
  /// the cache needs no part of the CUDA runtime.
  std::string strategy = "fused";

  bool operator==(const Schedule &o) const {
    return chunkSize == o.chunkSize && tileV == o.tileV && warps == o.warps &&
           strategy == o.strategy;
  }
  bool operator!=(const Schedule &o) const { return !(*this == o); }
  /// e.g. "chunk=64 tile_v=32 warps=4 fused".
  std::string str() const;
};

/// How a candidate's trial ended. Only Ok candidates may win.
enum class CandidateStatus {
  Ok,           ///< compiled, ran, matched the reference; timeMs is set
  CompileError, ///< codegen or NVRTC refused it
  LaunchError,  ///< the driver refused to load or launch it
  Mismatch,     ///< ran but its output differs from the reference
  Timeout,      ///< ran past the time limit
};

/// "ok", "compile_error", "launch_error", "mismatch", "timeout": the text
/// stored in the database.
const char *toString(CandidateStatus status);
std::optional<CandidateStatus> parseCandidateStatus(std::string_view text);

struct Candidate {
  Schedule schedule;
  CandidateStatus status = CandidateStatus::Ok;
  /// The median time of one forward call; unset when it did not run.
  std::optional<double> timeMs;
  /// Why it failed, e.g. NVRTC's log; empty when Ok.
  std::string error;
  /// Unix seconds when it was recorded; filled in by the cache on reads and
  /// ignored on writes.
  int64_t createdAt = 0;
};

} // namespace lina::cache

#endif // LINA_AUTOTUNE_CANDIDATE_H
