//===- BackwardTuning.h - The backward's schedules, tuned -------*- C++ -*-===//
//
// Part of lina. The backward's kernels are tuned like the forward's: their
// schedule (BackwardScheduleOptions: chunk size, tile-v, warps) is a space
// of knobs searched by the same tuner (Tuner.h), each candidate timed at a
// shape and recorded in lina's cache, where a backward kernel made for a
// shape of the same bucket finds the fastest. The keys are the forward's
// (TunedLookup.h) with the spec text marked as backward, and the stored
// schedules carry strategy "backward", so the three kinds of result
// (forward, decode, backward) never mix, in one cache with one schema.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_BACKWARDTUNING_H
#define LINA_AUTOTUNE_BACKWARDTUNING_H

#include "lina/Autotune/Cache.h"
#include "lina/Autotune/DeviceLimits.h"
#include "lina/Autotune/SearchKnob.h"
#include "lina/Autotune/TunedLookup.h"
#include "lina/Autotune/Tuner.h"
#include "lina/Codegen/KernelPlanner.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lina {

/// The text before a backward tuning key's spec: "backward ".
inline constexpr const char *kBackwardKeyPrefix = "backward ";

/// The tuning key of backward calls of `spec` for B = `batch` sequences of
/// up to `seqLen` tokens: makeTuningKey's, with the spec text marked.
cache::TuningKey makeBackwardTuningKey(const Spec &spec, const GpuIdentity &gpu,
                                       const std::string &nvrtcVersion,
                                       int64_t batch, int64_t seqLen);

/// A knob of the backward's schedule.
using BackwardKnob = SearchKnob<BackwardScheduleOptions>;

/// The knobs for `spec`, outermost first: chunk size (16, 32, 64, 128),
/// tile-v (powers of two from 16 up to min(value_dim, 128)), warps (2, 4,
/// 8, 16), barrier window (0, 16). A field the backward's planner gains
/// joins the search by one entry here and a place in toCacheSchedule.
std::vector<BackwardKnob> backwardScheduleKnobs(const Spec &spec);

/// How the tuning tables hold a backward schedule: its chunk size, tile-v
/// and warps in their columns, strategy "backward", with
/// "+barrier-window=N" where the window is not 0 (a field added later
/// rides on that text, as the forward's prefetch does on its strategy).
cache::Schedule toCacheSchedule(const BackwardScheduleOptions &schedule);
/// nullopt for a row that is not a backward schedule.
std::optional<BackwardScheduleOptions>
backwardFromCacheSchedule(const cache::Schedule &s);

/// Why `s` (strategy "backward") is no schedule a backward tune records
/// (a knob's value outside backwardScheduleKnobs at value_dim 128), or "".
std::string backwardScheduleProblem(const cache::Schedule &s);

/// "C16 tv32 w4", "C32 tv128 w8 bw16": how tables and logs name a
/// backward schedule.
std::string describe(const BackwardScheduleOptions &schedule);

bool sameBackwardSchedule(const BackwardScheduleOptions &a,
                          const BackwardScheduleOptions &b);

using BackwardTuneConfig = BasicTuneConfig<BackwardScheduleOptions>;
using BackwardTuneResult = BasicTuneResult<BackwardScheduleOptions>;

/// tuneFull and tuneFast (Tuner.h) over backward schedules: the same
/// recording, resuming and walk.
BackwardTuneResult tuneBackwardFull(
    cache::Cache &cache, const cache::TuningKey &key,
    const std::vector<BackwardScheduleOptions> &viable,
    const BackwardTuneConfig &config);
BackwardTuneResult tuneBackwardFast(
    cache::Cache &cache, const cache::TuningKey &key,
    const std::vector<BackwardKnob> &knobs,
    const std::vector<BackwardScheduleOptions> &viable,
    const BackwardScheduleOptions &start, size_t budget,
    const BackwardTuneConfig &config);

/// compareFastToFull (Tuner.h) over backward schedules: what fast picks
/// against the full sweep's best, from recorded times only.
std::optional<FastVsFull> compareBackwardFastToFull(
    cache::Cache &cache, const cache::TuningKey &key,
    const std::vector<BackwardKnob> &knobs,
    const std::vector<BackwardScheduleOptions> &viable,
    const BackwardScheduleOptions &start, size_t budget);

struct TunedBackward {
  BackwardScheduleOptions schedule;
  TunedSource source = TunedSource::Exact;
};

/// The fastest recorded backward schedule for `spec` at the shape, else its
/// tuningFamily()'s, else nullopt (then the default). A lookup, never a
/// tune; rows no backward tune records are skipped.
std::optional<TunedBackward>
lookupTunedBackward(cache::Cache &cache, const Spec &spec,
                    const GpuIdentity &gpu, const std::string &nvrtcVersion,
                    int64_t batch, int64_t seqLen);

/// `lina tune --backward --simulate`'s stand-in for a GPU timing: the cost
/// model's materialize forward at the backward's layout (the states kernel
/// is one, the backward walks the same chunks with about twice the work).
/// Only good enough to exercise the tune without a GPU.
double simulatedBackwardMilliseconds(const Spec &spec,
                                     const BackwardScheduleOptions &schedule,
                                     int64_t batch, int64_t seqLen,
                                     const DeviceLimits &limits,
                                     int64_t sharedBytes, int64_t threads);

} // namespace lina

#endif // LINA_AUTOTUNE_BACKWARDTUNING_H
