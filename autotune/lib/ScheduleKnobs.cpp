//===- ScheduleKnobs.cpp - The axes of the schedule space --------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/ScheduleKnobs.h"

#include <algorithm>
#include <string>

namespace lina {

std::vector<ScheduleKnob> scheduleKnobs(const Spec &spec) {
  std::vector<int64_t> tiles;
  for (int64_t tv = 16; tv <= std::min<int64_t>(spec.valueDim, 128); tv *= 2)
    tiles.push_back(tv);
  return {
      {"strategy",
       {0, 1, 2},
       [](const ScheduleOptions &s) -> int64_t {
         return static_cast<int64_t>(s.strategy);
       },
       [](ScheduleOptions &s, int64_t v) {
         s.strategy = static_cast<Strategy>(v);
       }},
      {"chunk-size",
       {16, 32, 64, 128},
       [](const ScheduleOptions &s) { return s.chunkSize; },
       [](ScheduleOptions &s, int64_t v) { s.chunkSize = v; }},
      {"tile-v", tiles, [](const ScheduleOptions &s) { return s.tileV; },
       [](ScheduleOptions &s, int64_t v) { s.tileV = v; }},
      {"warps",
       {2, 4, 8},
       [](const ScheduleOptions &s) { return s.warps; },
       [](ScheduleOptions &s, int64_t v) { s.warps = v; }},
      // Searched: the GPU suite passes the prefetching scans, and whether
      // hiding the next chunk's loads pays depends on the shape
      // (docs/perf-notes.md).
      {"prefetch",
       {0, 1},
       [](const ScheduleOptions &s) -> int64_t { return s.prefetch; },
       [](ScheduleOptions &s, int64_t v) { s.prefetch = v != 0; }},
  };
}

std::string describe(const ScheduleOptions &s) {
  return "C" + std::to_string(s.chunkSize) + " tv" + std::to_string(s.tileV) +
         " w" + std::to_string(s.warps) + " " + toString(s.strategy) +
         (s.prefetch ? " prefetch" : "") +
         (s.sharedState ? " shared-state" : "") +
         (s.mmaDecay ? " mma-decay" : "");
}

bool sameSchedule(const ScheduleOptions &a, const ScheduleOptions &b) {
  // Through the knobs, so a new knob is compared without touching this.
  for (const ScheduleKnob &k : scheduleKnobs(Spec()))
    if (k.get(a) != k.get(b))
      return false;
  return true;
}

namespace {
// The cache keeps the schedule as four columns; prefetch rides on the
// strategy's text ("split+prefetch"), so caches written before the knob
// existed read as "no prefetch" and no schema change was needed.
constexpr const char *prefetchSuffix = "+prefetch";
} // namespace

cache::Schedule toCacheSchedule(const ScheduleOptions &s) {
  return {s.chunkSize, s.tileV, s.warps,
          std::string(toString(s.strategy)) +
              (s.prefetch ? prefetchSuffix : "")};
}

ScheduleOptions fromCacheSchedule(const cache::Schedule &s) {
  ScheduleOptions o;
  o.chunkSize = s.chunkSize;
  o.tileV = s.tileV;
  o.warps = s.warps;
  std::string strategy = s.strategy;
  size_t suffix = strategy.rfind(prefetchSuffix);
  if (suffix != std::string::npos &&
      suffix + std::string(prefetchSuffix).size() == strategy.size()) {
    o.prefetch = true;
    strategy.resize(suffix);
  }
  if (!parseStrategy(strategy, o.strategy))
    o.strategy = Strategy::FusedScan;
  return o;
}

} // namespace lina
