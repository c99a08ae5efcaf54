//===- DecodeTuning.cpp - Tuned decode schedules by batch --------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/DecodeTuning.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

namespace lina {

namespace {
constexpr const char *kDecodeStrategy = "decode";
} // namespace

cache::TuningKey makeDecodeTuningKey(const Spec &spec, const GpuIdentity &gpu,
                                     const std::string &nvrtcVersion,
                                     int64_t batch, int64_t tokens) {
  Spec normalized = spec;
  normalized.initialState = normalized.finalState = false;
  cache::TuningKey key =
      makeTuningKey(normalized, gpu, nvrtcVersion, batch, tokens);
  key.spec = "decode " + key.spec;
  return key;
}

cache::Schedule toCacheSchedule(const DecodeSchedule &schedule) {
  return {1, schedule.warpColumns, schedule.warps, kDecodeStrategy};
}

std::optional<DecodeSchedule>
decodeFromCacheSchedule(const cache::Schedule &s) {
  if (s.strategy != kDecodeStrategy || s.chunkSize != 1 || s.tileV <= 0 ||
      s.warps <= 0)
    return std::nullopt;
  return DecodeSchedule{s.tileV, s.warps};
}

std::string describe(const DecodeSchedule &schedule) {
  return "w" + std::to_string(schedule.warpColumns) + " x" +
         std::to_string(schedule.warps);
}

std::optional<DecodeSchedule> lookupTunedDecode(cache::Cache &cache,
                                                const Spec &spec,
                                                const GpuIdentity &gpu,
                                                const std::string &nvrtcVersion,
                                                int64_t batch, int64_t tokens) {
  // The spec's own result, else its family's (tuningFamily: a Python call
  // whose flags differ from the tuned preset's). A row no tune records is
  // skipped (storedScheduleProblem).
  for (const Spec &s : {spec, tuningFamily(spec)})
    if (std::optional<cache::Candidate> best = cache.best(
            makeDecodeTuningKey(s, gpu, nvrtcVersion, batch, tokens),
            storedScheduleProblem))
      return decodeFromCacheSchedule(best->schedule);
  return std::nullopt;
}

double simulatedDecodeMicroseconds(const Spec &spec, int64_t batch,
                                   int64_t tokens,
                                   const DecodeSchedule &schedule) {
  double stateBytes = 2.0 * double(batch * spec.valueHeads) *
                      double(spec.keyDim * spec.valueDim) * 4.0;
  double width = double(schedule.warpColumns);
  double warpsLaunched =
      double(batch * spec.valueHeads) * double(spec.valueDim) / width;
  // About 16 warps per SM on 132 SMs keep the memory system busy.
  double busy = std::min(1.0, warpsLaunched / (132.0 * 16.0));
  // Warps of one CTA share an SM's slots: tiny CTAs fill them less well.
  double ctaFit = schedule.warps >= 2 ? 1.0 : 0.9;
  double bytesPerSecond = 4.0e12 * busy * ctaFit;
  double perToken = 1.0 + 2.0 / width;
  return 3.0 + stateBytes / bytesPerSecond * 1e6 * perToken *
                   (1.0 + 0.05 * double(tokens - 1));
}

DecodeScheduleChooser tunedDecodeChooser(cache::Cache *cache, const Spec &spec,
                                         const GpuIdentity &gpu,
                                         const std::string &nvrtcVersion) {
  if (!cache)
    return nullptr;
  // Every decode call asks: a call shape seen before is one map lookup, and
  // only a new shape names its bucket (a string) to find the bucket's answer.
  struct Memo {
    std::mutex mutex;
    std::map<std::pair<int64_t, int64_t>, std::optional<DecodeSchedule>> byCall;
    std::map<std::string, std::optional<DecodeSchedule>> byBucket;
  };
  auto memo = std::make_shared<Memo>();
  return [=](int64_t batch, int64_t tokens) -> std::optional<DecodeSchedule> {
    std::lock_guard<std::mutex> lock(memo->mutex);
    auto seen = memo->byCall.find({batch, tokens});
    if (seen != memo->byCall.end())
      return seen->second;
    std::string bucket =
        cache::shapeBucket(batch, tokens, spec.valueHeads).str();
    auto found = memo->byBucket.find(bucket);
    std::optional<DecodeSchedule> tuned =
        found != memo->byBucket.end()
            ? found->second
            : lookupTunedDecode(*cache, spec, gpu, nvrtcVersion, batch, tokens);
    memo->byBucket.emplace(bucket, tuned);
    memo->byCall.emplace(std::make_pair(batch, tokens), tuned);
    return tuned;
  };
}

} // namespace lina
