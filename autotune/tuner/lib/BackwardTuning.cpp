//===- BackwardTuning.cpp - The backward's schedules, tuned ------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/BackwardTuning.h"

#include "Search.h"
#include "lina/Autotune/CostModel.h"

#include <algorithm>

namespace lina {

namespace {

constexpr const char *kBackwardStrategy = "backward";
/// The barrier window rides on the strategy's text:
/// "backward+barrier-window=16" (no suffix: 0, as rows written before the
/// knob existed read).
constexpr const char *kBarrierWindowSuffix = "+barrier-window=";

// A field the backward's schedule gains must be searched (a knob in
// backwardScheduleKnobs, or left at its default there on purpose) and
// stored (toCacheSchedule: e.g. "backward+name=value" in the strategy's
// text), or two candidates that differ only in it would be one row.
static_assert(sizeof(BackwardScheduleOptions) == 4 * sizeof(int64_t),
              "BackwardScheduleOptions changed: give the new field a place "
              "in backwardScheduleKnobs and toCacheSchedule "
              "(BackwardTuning.cpp), then update this count");

std::vector<int64_t> tileValues(const Spec &spec) {
  std::vector<int64_t> tiles;
  for (int64_t tv = 16; tv <= std::min<int64_t>(spec.valueDim, 128); tv *= 2)
    tiles.push_back(tv);
  return tiles;
}

const search::Codec<BackwardScheduleOptions> &backwardCodec() {
  static const search::Codec<BackwardScheduleOptions> codec = {
      [](const BackwardScheduleOptions &s) { return toCacheSchedule(s); },
      [](const cache::Schedule &s) {
        return backwardFromCacheSchedule(s).value_or(BackwardScheduleOptions{});
      },
      sameBackwardSchedule,
      // Every backward schedule is one knob away from another: no
      // counterpart to walk from.
      nullptr};
  return codec;
}

} // namespace

cache::TuningKey makeBackwardTuningKey(const Spec &spec, const GpuIdentity &gpu,
                                       const std::string &nvrtcVersion,
                                       int64_t batch, int64_t seqLen) {
  cache::TuningKey key = makeTuningKey(spec, gpu, nvrtcVersion, batch, seqLen);
  key.spec = kBackwardKeyPrefix + key.spec;
  return key;
}

std::vector<BackwardKnob> backwardScheduleKnobs(const Spec &spec) {
  return {
      {"chunk-size",
       {16, 32, 64, 128},
       [](const BackwardScheduleOptions &s) { return s.chunkSize; },
       [](BackwardScheduleOptions &s, int64_t v) { s.chunkSize = v; }},
      {"tile-v", tileValues(spec),
       [](const BackwardScheduleOptions &s) { return s.tileV; },
       [](BackwardScheduleOptions &s, int64_t v) { s.tileV = v; }},
      // A CTA an SM is what the backward's bodies get from shared memory:
      // its warps are all the SM has to hide latency with (on the H200,
      // 16 warps made gdn's chunk-parallel kernel 1.3x and kda's 1.9x
      // faster than 4).
      {"warps",
       {2, 4, 8, 16},
       [](const BackwardScheduleOptions &s) { return s.warps; },
       [](BackwardScheduleOptions &s, int64_t v) { s.warps = v; }},
      // The gradients kernel's ops grouped between fewer barriers
      // (lina-group-barriers) keep more tiles alive at once, some of them
      // in global memory: which pays depends on the spec and the GPU.
      {"barrier-window",
       {0, 16},
       [](const BackwardScheduleOptions &s) { return s.barrierWindow; },
       [](BackwardScheduleOptions &s, int64_t v) { s.barrierWindow = v; }},
  };
}

cache::Schedule toCacheSchedule(const BackwardScheduleOptions &schedule) {
  std::string strategy = kBackwardStrategy;
  if (schedule.barrierWindow != 0)
    strategy += kBarrierWindowSuffix + std::to_string(schedule.barrierWindow);
  return {schedule.chunkSize, schedule.tileV, schedule.warps, strategy};
}

std::optional<BackwardScheduleOptions>
backwardFromCacheSchedule(const cache::Schedule &s) {
  if (s.chunkSize <= 0 || s.tileV <= 0 || s.warps <= 0)
    return std::nullopt;
  BackwardScheduleOptions out;
  const std::string prefix =
      std::string(kBackwardStrategy) + kBarrierWindowSuffix;
  if (s.strategy.rfind(prefix, 0) == 0) {
    std::string digits = s.strategy.substr(prefix.size());
    if (digits.empty() || digits.size() > 3 ||
        digits.find_first_not_of("0123456789") != std::string::npos ||
        std::stoll(digits) == 0)
      return std::nullopt;
    out.barrierWindow = std::stoll(digits);
  } else if (s.strategy != kBackwardStrategy) {
    return std::nullopt;
  }
  out.chunkSize = s.chunkSize;
  out.tileV = s.tileV;
  out.warps = s.warps;
  return out;
}

std::string backwardScheduleProblem(const cache::Schedule &s) {
  std::optional<BackwardScheduleOptions> schedule =
      backwardFromCacheSchedule(s);
  if (!schedule)
    return "not a backward schedule (" + s.str() + ")";
  // value_dim 128 admits every tile-v.
  for (const BackwardKnob &knob : backwardScheduleKnobs(Spec())) {
    int64_t value = knob.get(*schedule);
    if (std::find(knob.values.begin(), knob.values.end(), value) ==
        knob.values.end()) {
      std::string among;
      for (size_t i = 0; i < knob.values.size(); ++i)
        among += (i == 0 ? "" : i + 1 == knob.values.size() ? " or " : ", ") +
                 std::to_string(knob.values[i]);
      return std::string("backward ") + knob.name + " " +
             std::to_string(value) + " is not one of " + among;
    }
  }
  return "";
}

std::string describe(const BackwardScheduleOptions &s) {
  return "C" + std::to_string(s.chunkSize) + " tv" + std::to_string(s.tileV) +
         " w" + std::to_string(s.warps) +
         (s.barrierWindow != 0 ? " bw" + std::to_string(s.barrierWindow) : "");
}

bool sameBackwardSchedule(const BackwardScheduleOptions &a,
                          const BackwardScheduleOptions &b) {
  return toCacheSchedule(a) == toCacheSchedule(b);
}

BackwardTuneResult tuneBackwardFull(
    cache::Cache &cache, const cache::TuningKey &key,
    const std::vector<BackwardScheduleOptions> &viable,
    const BackwardTuneConfig &config) {
  return search::full(cache, key, viable, config, backwardCodec());
}

BackwardTuneResult tuneBackwardFast(
    cache::Cache &cache, const cache::TuningKey &key,
    const std::vector<BackwardKnob> &knobs,
    const std::vector<BackwardScheduleOptions> &viable,
    const BackwardScheduleOptions &start, size_t budget,
    const BackwardTuneConfig &config) {
  return search::fast(cache, key, knobs, viable, start, budget, config,
                      backwardCodec());
}

std::optional<FastVsFull> compareBackwardFastToFull(
    cache::Cache &cache, const cache::TuningKey &key,
    const std::vector<BackwardKnob> &knobs,
    const std::vector<BackwardScheduleOptions> &viable,
    const BackwardScheduleOptions &start, size_t budget) {
  return search::compare(cache, key, knobs, viable, start, budget,
                         backwardCodec());
}

std::optional<TunedBackward>
lookupTunedBackward(cache::Cache &cache, const Spec &spec,
                    const GpuIdentity &gpu, const std::string &nvrtcVersion,
                    int64_t batch, int64_t seqLen) {
  for (TunedSource source : {TunedSource::Exact, TunedSource::Family}) {
    const Spec &s = source == TunedSource::Exact ? spec : tuningFamily(spec);
    std::optional<cache::Candidate> best =
        cache.best(makeBackwardTuningKey(s, gpu, nvrtcVersion, batch, seqLen),
                   backwardScheduleProblem);
    if (best)
      if (std::optional<BackwardScheduleOptions> schedule =
              backwardFromCacheSchedule(best->schedule))
        return TunedBackward{*schedule, source};
  }
  return std::nullopt;
}

double simulatedBackwardMilliseconds(const Spec &spec,
                                     const BackwardScheduleOptions &schedule,
                                     int64_t batch, int64_t seqLen,
                                     const DeviceLimits &limits,
                                     int64_t sharedBytes, int64_t threads) {
  ScheduleOptions scan;
  scan.chunkSize = schedule.chunkSize;
  scan.tileV = schedule.tileV;
  scan.warps = schedule.warps;
  scan.strategy = Strategy::Materialize;
  return 3 * modelMilliseconds(spec, scan, batch, seqLen, limits, sharedBytes,
                               threads);
}

} // namespace lina
