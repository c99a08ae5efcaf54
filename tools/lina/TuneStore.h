//===- TuneStore.h - Where a tune records, and for which GPU ----*- C++ -*-===//
//
// Part of lina. Shared by the chunk and the decode halves of `lina tune`.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TOOLS_TUNESTORE_H
#define LINA_TOOLS_TUNESTORE_H

#include "lina/Autotune/Cache.h"
#include "lina/Autotune/TunedLookup.h"
#include "lina/Runtime/Device.h"

#include <memory>
#include <string>

namespace lina::cli {

/// The cache a tune records in: the process's, or with LINA_CACHE=off an
/// in-memory one (the tune still works, it only cannot resume or be found
/// later).
struct TuneStore {
  cache::Cache *db = nullptr;
  std::unique_ptr<cache::Cache> memory; ///< set when LINA_CACHE is off

  static TuneStore open();
  /// "recorded in PATH", or why nothing will be found later.
  std::string where() const;
  /// Why the results of this process's tune did not reach the cache file
  /// (the cache's notSavedReason()); "" when they did, when no tune opened
  /// the cache, and with LINA_CACHE=off, which asks for memory.
  static std::string notSaved();
};

/// A tune's exit status from `status`, the one its printing ended with: a
/// tune whose results were not saved still printed its timings (they are
/// worth having), but it has not done what it was asked, so this ends the
/// output with "lina tune: warning: results not saved: REASON" on stderr
/// and gives 1; the warning the cache gave when it happened may be far
/// above, among the progress lines.
int finishTune(int status);

/// What a tuning key says about the GPU: `device`'s facts and NVRTC's
/// version, or with `simulate` the cost model's stand-in GPU "simulated"
/// with `smCount` SMs.
struct TuneTarget {
  GpuIdentity gpu;
  std::string nvrtc;
};
TuneTarget tuneTarget(const cuda::Device *device, bool simulate,
                      int64_t smCount);

} // namespace lina::cli

#endif // LINA_TOOLS_TUNESTORE_H
