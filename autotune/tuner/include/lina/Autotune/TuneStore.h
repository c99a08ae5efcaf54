//===- TuneStore.h - Where a tune records, and for which GPU ----*- C++ -*-===//
//
// Part of lina. Shared by the chunk tune (TuneSession.h) and `lina tune
// --decode`: the cache the results go to, whether they stay there, and the
// GPU facts they are recorded under.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_TUNESTORE_H
#define LINA_AUTOTUNE_TUNESTORE_H

#include "lina/Autotune/Cache.h"
#include "lina/Autotune/DeviceLimits.h"
#include "lina/Autotune/TunedLookup.h"
#include "lina/Runtime/Device.h"

#include <memory>
#include <string>

namespace lina {

/// The cache a tune records in: the one given, else the process's, or with
/// LINA_CACHE=off an in-memory one (the tune still works, it only cannot
/// resume or be found later).
struct TuneStore {
  cache::Cache *db = nullptr;
  std::unique_ptr<cache::Cache> memory; ///< set when LINA_CACHE is off

  /// `given` (nullptr: the process's cache, processCache()).
  static TuneStore open(cache::Cache *given = nullptr);
  /// Why what was recorded will not be found by a later process: LINA_CACHE
  /// is off, or the cache's notSavedReason(); "" when it will.
  std::string notSavedReason() const;
  /// Why the results of this process's tunes did not reach the process's
  /// cache file (its notSavedReason()); "" when they did, when no tune
  /// opened that cache (asking must not create the file after a dry run),
  /// and with LINA_CACHE=off, which asks for memory.
  static std::string processNotSaved();
};

/// What a tuning key says about the GPU: `device`'s facts and NVRTC's
/// version, or with `simulate` (or no device) the cost model's stand-in GPU
/// "simulated" with `smCount` SMs.
struct TuneTarget {
  GpuIdentity gpu;
  std::string nvrtc;
};
TuneTarget tuneTarget(const cuda::Device *device, bool simulate,
                      int64_t smCount);

/// What pruning needs to know of `device` (DeviceLimits.h).
DeviceLimits deviceLimits(const cuda::Device &device);

} // namespace lina

#endif // LINA_AUTOTUNE_TUNESTORE_H
