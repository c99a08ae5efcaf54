//===- ScheduleKnobs.cpp - The axes of the schedule space --------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/ScheduleKnobs.h"

#include <algorithm>

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
      // Only off in the search until the GPU suite has run the prefetching
      // kernels (docs/perf-notes.md); a knob all the same, so that cubin keys
      // and schedule comparisons tell the two apart.
      {"prefetch",
       {0},
       [](const ScheduleOptions &s) -> int64_t { return s.prefetch; },
       [](ScheduleOptions &s, int64_t v) { s.prefetch = v != 0; }},
  };
}

bool sameSchedule(const ScheduleOptions &a, const ScheduleOptions &b) {
  // Through the knobs, so a new knob is compared without touching this.
  for (const ScheduleKnob &k : scheduleKnobs(Spec()))
    if (k.get(a) != k.get(b))
      return false;
  return true;
}

cache::Schedule toCacheSchedule(const ScheduleOptions &s) {
  return {s.chunkSize, s.tileV, s.warps, toString(s.strategy)};
}

ScheduleOptions fromCacheSchedule(const cache::Schedule &s) {
  ScheduleOptions o;
  o.chunkSize = s.chunkSize;
  o.tileV = s.tileV;
  o.warps = s.warps;
  if (!parseStrategy(s.strategy, o.strategy))
    o.strategy = Strategy::FusedScan;
  return o;
}

} // namespace lina
