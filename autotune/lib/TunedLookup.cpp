//===- TunedLookup.cpp - The tuned schedule for a problem --------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/TunedLookup.h"

#include "lina/Autotune/ScheduleKnobs.h"

namespace lina {

std::string driverVersionString(int version) {
  return std::to_string(version / 1000) + "." +
         std::to_string(version % 1000 / 10);
}

cache::TuningKey makeTuningKey(const Spec &spec, const GpuIdentity &gpu,
                               const std::string &nvrtcVersion, int64_t batch,
                               int64_t seqLen) {
  cache::TuningKey key;
  key.spec = cache::canonicalSpecText(spec);
  key.gpuName = gpu.name;
  key.arch = gpu.arch;
  key.smCount = gpu.smCount;
  key.driverVersion = gpu.driverVersion;
  key.nvrtcVersion = nvrtcVersion;
  key.shapeBucket = cache::shapeBucket(batch, seqLen, spec.valueHeads).str();
  return key;
}

std::optional<ScheduleOptions> tunedSchedule(cache::Cache &cache,
                                             const cache::TuningKey &key) {
  std::optional<cache::Candidate> best = cache.best(key);
  if (!best)
    return std::nullopt;
  return fromCacheSchedule(best->schedule);
}

} // namespace lina
