//===- TunedLookup.cpp - The tuned schedule for a problem --------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/TunedLookup.h"
#include "lina/Autotune/BackwardTuning.h"

#include "lina/Autotune/DecodeTuning.h"
#include "lina/Autotune/ScheduleKnobs.h"

#include <algorithm>

namespace lina {

namespace {

std::string valueList(const std::vector<int64_t> &values) {
  std::string text;
  for (size_t i = 0; i < values.size(); ++i)
    text += (i == 0 ? "" : i + 1 == values.size() ? " or " : ", ") +
            std::to_string(values[i]);
  return text;
}

/// "NAME V is not one of ..." when \p value is not among \p values.
std::string notAmong(const std::string &name, int64_t value,
                     std::vector<int64_t> values) {
  if (std::find(values.begin(), values.end(), value) != values.end())
    return "";
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return name + " " + std::to_string(value) + " is not one of " +
         valueList(values);
}

/// A spec whose search space holds every value of every knob: value_dim
/// 128 (every tile-v) and a rule that runs in segments and on the wgmma
/// scan (mamba2's: an additive update with a scalar decay, bf16, d128).
Spec widestSpec() {
  Spec spec;
  spec.decay = DecayKind::Scalar;
  spec.update = UpdateRule::Additive;
  return spec;
}

std::string decodeScheduleProblem(const cache::Schedule &stored) {
  if (stored.chunkSize != 1)
    return "a decode schedule's chunk size is 1, not " +
           std::to_string(stored.chunkSize);
  // The default spec's dims (128) admit every warp width.
  std::vector<int64_t> columns, warps;
  for (const DecodeSchedule &s : decodeScheduleSpace(Spec())) {
    columns.push_back(s.warpColumns);
    warps.push_back(s.warps);
  }
  std::string problem = notAmong("decode warp columns", stored.tileV, columns);
  return problem.empty() ? notAmong("decode warps", stored.warps, warps)
                         : problem;
}

} // namespace

std::string storedScheduleProblem(const cache::Schedule &stored) {
  if (stored.strategy == toCacheSchedule(DecodeSchedule{}).strategy)
    return decodeScheduleProblem(stored);
  if (stored.strategy == toCacheSchedule(BackwardScheduleOptions{}).strategy)
    return backwardScheduleProblem(stored);
  ScheduleOptions schedule = fromCacheSchedule(stored);
  for (const ScheduleKnob &knob : scheduleKnobs(widestSpec())) {
    std::string problem = notAmong(knob.name, knob.get(schedule), knob.values);
    if (!problem.empty())
      return problem;
  }
  return "";
}

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
  key.specName = spec.name;
  return key;
}

std::optional<ScheduleOptions> tunedSchedule(cache::Cache &cache,
                                             const cache::TuningKey &key) {
  std::optional<cache::Candidate> best =
      cache.best(key, [](const cache::Schedule &s) -> std::string {
        if (s.strategy == toCacheSchedule(DecodeSchedule{}).strategy)
          return "a decode schedule where a chunk kernel's belongs";
        if (s.strategy ==
            toCacheSchedule(BackwardScheduleOptions{}).strategy)
          return "a backward schedule where a chunk kernel's belongs";
        return storedScheduleProblem(s);
      });
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
