//===- DecodeTuning.h - Tuned decode schedules by batch ---------*- C++ -*-===//
//
// Part of lina. Decode kernels are tuned like the chunk kernels: `lina tune
// --decode` records every (warp columns, warps) candidate of a spec on this
// GPU for a shape bucket of (batch x value heads, tokens), and a decode
// kernel whose schedule is left open asks, once per bucket it sees, for the
// fastest one. The keys are the chunk kernels' (TunedLookup.h), with the spec
// text marked as decode, so the two never mix.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_DECODETUNING_H
#define LINA_AUTOTUNE_DECODETUNING_H

#include "lina/Autotune/Cache.h"
#include "lina/Autotune/TunedLookup.h"
#include "lina/Runtime/DecodeKernel.h"

#include <cstdint>
#include <optional>
#include <string>

namespace lina {

/// The tuning key of decode calls of `spec` with `batch` sequences of
/// `tokens` tokens. The state flags do not change a decode kernel, so they
/// are left out, as the C API's kernel cache does.
cache::TuningKey makeDecodeTuningKey(const Spec &spec, const GpuIdentity &gpu,
                                     const std::string &nvrtcVersion,
                                     int64_t batch, int64_t tokens);

/// How the tuning table holds a decode schedule: chunk size 1 (the recurrent
/// form), tile-v the warp columns, the warps, and strategy "decode".
cache::Schedule toCacheSchedule(const DecodeSchedule &schedule);
/// nullopt for a row that is not a decode schedule.
std::optional<DecodeSchedule> decodeFromCacheSchedule(const cache::Schedule &s);

/// "w16 x4": how tables name a decode schedule.
std::string describe(const DecodeSchedule &schedule);

/// The fastest recorded decode schedule for the call, for `spec` itself or
/// else for its tuningFamily(), or nullopt (then the by-batch default is
/// used). A lookup, never a tune.
std::optional<DecodeSchedule> lookupTunedDecode(cache::Cache &cache,
                                                const Spec &spec,
                                                const GpuIdentity &gpu,
                                                const std::string &nvrtcVersion,
                                                int64_t batch, int64_t tokens);

/// `lina tune --decode --simulate`'s stand-in for a GPU timing, in
/// microseconds: the state's bytes at a bandwidth that grows with the warps
/// in flight, plus the repeated q/k loads of narrow warps and a launch
/// latency. Only good enough to exercise the tune without a GPU.
double simulatedDecodeMicroseconds(const Spec &spec, int64_t batch,
                                   int64_t tokens,
                                   const DecodeSchedule &schedule);

/// A DecodeKernel's chooser over `cache` (which must outlive it): each
/// bucket is looked up once, then remembered (thread-safe).
DecodeScheduleChooser tunedDecodeChooser(cache::Cache *cache, const Spec &spec,
                                         const GpuIdentity &gpu,
                                         const std::string &nvrtcVersion);

} // namespace lina

#endif // LINA_AUTOTUNE_DECODETUNING_H
