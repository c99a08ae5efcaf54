//===- TunedLookup.h - The tuned schedule for a problem ---------*- C++ -*-===//
//
// Part of lina. One function builds the tuning key from a spec, a GPU and a
// shape, used both by `lina tune` when it records and by the runtime when it
// looks up, so the two can never disagree on what a key holds.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_TUNEDLOOKUP_H
#define LINA_AUTOTUNE_TUNEDLOOKUP_H

#include "lina/Autotune/Cache.h"
#include "lina/Codegen/KernelPlanner.h"

#include <cstdint>
#include <optional>
#include <string>

namespace lina {

/// The GPU facts in a tuning key (see cache::TuningKey).
struct GpuIdentity {
  std::string name; ///< e.g. "NVIDIA H200"
  std::string arch; ///< e.g. "sm_90"
  int64_t smCount = 0;
  std::string driverVersion; ///< e.g. "13.0"
};

/// "13.0" for cuDriverGetVersion's 13000.
std::string driverVersionString(int version);

/// The key of `spec` (heads included) on `gpu` for B = `batch` sequences of
/// up to `seqLen` tokens: the bucket is shapeBucket(batch, seqLen,
/// spec.valueHeads).
cache::TuningKey makeTuningKey(const Spec &spec, const GpuIdentity &gpu,
                               const std::string &nvrtcVersion, int64_t batch,
                               int64_t seqLen);

/// Why `schedule`, as the cache stores it, is no schedule a tune of this
/// lina records ("" when it is one): for a decode schedule (strategy
/// "decode"), chunk size 1 and warp columns and warps of the decode space
/// (decodeScheduleSpace); for a backward schedule (strategy "backward"),
/// backwardScheduleProblem; for any other, a chunk size, tile-v, warps and
/// segments among the values the search space's knobs take (scheduleKnobs,
/// at value_dim 128 and for a rule with every knob), e.g. "chunk-size 7 is
/// not one of 16, 32, 64, 128". `lina cache import` refuses a file with such
/// a row and the tuned lookups skip one (cache::ScheduleCheck).
std::string storedScheduleProblem(const cache::Schedule &schedule);

/// The fastest recorded Ok schedule of `key`, or nullopt: then the caller
/// uses defaultSchedule(). A lookup, never a tune. A row no tune records
/// (storedScheduleProblem, or a decode or backward schedule) is skipped
/// with a warning.
std::optional<ScheduleOptions> tunedSchedule(cache::Cache &cache,
                                             const cache::TuningKey &key);

/// `spec` with the fields that barely move a schedule's cost set to fixed
/// values: whether state comes in or goes out, the scale, q/k l2norm, how
/// gates and betas are derived from their inputs (per-token elementwise
/// work), and varlen (the shape bucket covers the lengths). What remains
/// (decay, update, low-rank and write forms, dims, heads, dtype) decides
/// which schedule wins. `lina tune` records its winner under this spec's
/// key too, and a lookup that finds nothing for the exact spec takes the
/// family's: a tune of `gdn` then serves a Python call that differs from
/// the preset only in its flags. Any schedule is correct for any spec, so a
/// family result can cost speed, never correctness.
Spec tuningFamily(const Spec &spec);

/// Where a tuned schedule came from.
enum class TunedSource { Exact, Family };

struct TunedChoice {
  ScheduleOptions schedule;
  TunedSource source = TunedSource::Exact;
};

/// The exact key's fastest schedule, else its family's (tuningFamily()),
/// else nullopt.
std::optional<TunedChoice> lookupTuned(cache::Cache &cache, const Spec &spec,
                                       const GpuIdentity &gpu,
                                       const std::string &nvrtcVersion,
                                       int64_t batch, int64_t seqLen);

} // namespace lina

#endif // LINA_AUTOTUNE_TUNEDLOOKUP_H
