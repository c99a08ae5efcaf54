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

Spec tuningFamily(const Spec &spec) {
  Spec family = spec;
  family.initialState = false;
  family.finalState = false;
  family.scale.reset();
  family.qkL2Norm = false;
  family.gate = GateSource::Given;
  family.gateLowerBound = Spec().gateLowerBound;
  if (family.beta != BetaSource::None)
    family.beta = BetaSource::Given;
  family.varlen = false;
  return family;
}

std::optional<TunedChoice> lookupTuned(cache::Cache &cache, const Spec &spec,
                                       const GpuIdentity &gpu,
                                       const std::string &nvrtcVersion,
                                       int64_t batch, int64_t seqLen) {
  if (std::optional<ScheduleOptions> exact = tunedSchedule(
          cache, makeTuningKey(spec, gpu, nvrtcVersion, batch, seqLen)))
    return TunedChoice{*exact, TunedSource::Exact};
  if (std::optional<ScheduleOptions> family = tunedSchedule(
          cache, makeTuningKey(tuningFamily(spec), gpu, nvrtcVersion, batch,
                               seqLen)))
    return TunedChoice{*family, TunedSource::Family};
  return std::nullopt;
}

} // namespace lina
