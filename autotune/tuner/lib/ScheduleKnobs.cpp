//===- ScheduleKnobs.cpp - The axes of the schedule space --------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/ScheduleKnobs.h"

#include "lina/Runtime/KernelForms.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

namespace lina {

std::vector<ScheduleKnob> scheduleKnobs(const Spec &spec) {
  std::vector<int64_t> tiles;
  for (int64_t tv = 16; tv <= std::min<int64_t>(spec.valueDim, 128); tv *= 2)
    tiles.push_back(tv);
  std::vector<ScheduleKnob> knobs = {
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
  // Searched where the rule can run in segments: whether they pay depends
  // on how many heads the shape has (Plan.cpp's defaultSegments).
  if (canRunInSegments(spec))
    knobs.push_back({"segments",
                     {1, 2, 4, 8, 16},
                     [](const ScheduleOptions &s) { return s.segments; },
                     [](ScheduleOptions &s, int64_t v) { s.segments = v; }});
  // Searched where the spec can run it: the fused scan as Hopper's
  // warpgroup products (one layout, C64 tv128 w8 fused; sm_90 only, which
  // pruning checks).
  if (canRunWgmmaScan(spec))
    knobs.push_back(
        {"warpgroup",
         {0, 1},
         [](const ScheduleOptions &s) -> int64_t { return s.warpgroup; },
         [](ScheduleOptions &s, int64_t v) { s.warpgroup = v != 0; }});
  return knobs;
}

std::string describe(const ScheduleOptions &s) {
  std::string text = "C" + std::to_string(s.chunkSize) + " tv" +
                     std::to_string(s.tileV) + " w" + std::to_string(s.warps) +
                     " " + toString(s.strategy) +
                     (s.prefetch ? " prefetch" : "");
  for (const ScheduleKnob &flag : scheduleFlags())
    if (flag.get(s))
      text += std::string(" ") + flag.name;
  if (s.segments > 1)
    text += " segments " + std::to_string(s.segments);
  return text;
}

std::vector<ScheduleKnob> scheduleFlags() {
  return {
      {"shared-state",
       {0, 1},
       [](const ScheduleOptions &s) -> int64_t { return s.sharedState; },
       [](ScheduleOptions &s, int64_t v) { s.sharedState = v != 0; }},
      {"direct-decay",
       {0, 1},
       [](const ScheduleOptions &s) -> int64_t { return s.directDecay; },
       [](ScheduleOptions &s, int64_t v) { s.directDecay = v != 0; }},
      {"two-ctas",
       {0, 1},
       [](const ScheduleOptions &s) -> int64_t { return s.twoCTAs; },
       [](ScheduleOptions &s, int64_t v) { s.twoCTAs = v != 0; }},
      {"warpgroup",
       {0, 1},
       [](const ScheduleOptions &s) -> int64_t { return s.warpgroup; },
       [](ScheduleOptions &s, int64_t v) { s.warpgroup = v != 0; }},
  };
}

std::vector<ScheduleKnob> scheduleFields(const Spec &spec) {
  std::vector<ScheduleKnob> fields = scheduleKnobs(spec);
  // A flag the tuner searches for this spec (warpgroup) is among the knobs.
  for (ScheduleKnob &flag : scheduleFlags())
    if (std::none_of(fields.begin(), fields.end(), [&](const ScheduleKnob &k) {
          return std::strcmp(k.name, flag.name) == 0;
        }))
      fields.push_back(std::move(flag));
  return fields;
}

bool sameSchedule(const ScheduleOptions &a, const ScheduleOptions &b) {
  // Through the fields, so a new knob or flag is compared without touching
  // this.
  for (const ScheduleKnob &k : scheduleFields(Spec()))
    if (k.get(a) != k.get(b))
      return false;
  return a.segments == b.segments;
}

namespace {
// The cache keeps the schedule as four columns; prefetch and the flags ride
// on the strategy's text ("split+prefetch+direct-decay"), so caches written
// before they existed read as "off" and no schema change was needed.
constexpr const char *prefetchSuffix = "prefetch";
// Segments ride there too, with their count: "split+segments=4" (a knob
// of the rules that can run in segments, 1 for the others).
constexpr const char *segmentsSuffix = "segments=";
// The warpgroup flag's name before it was "warpgroup": rows written with
// it read as the same schedule.
constexpr const char *oldWarpgroupSuffix = "wgmma";
} // namespace

cache::Schedule toCacheSchedule(const ScheduleOptions &s) {
  std::string strategy = toString(s.strategy);
  if (s.prefetch)
    strategy += std::string("+") + prefetchSuffix;
  for (const ScheduleKnob &flag : scheduleFlags())
    if (flag.get(s))
      strategy += std::string("+") + flag.name;
  if (s.segments > 1)
    strategy += std::string("+") + segmentsSuffix + std::to_string(s.segments);
  return {s.chunkSize, s.tileV, s.warps, strategy};
}

ScheduleOptions fromCacheSchedule(const cache::Schedule &s) {
  ScheduleOptions o;
  o.chunkSize = s.chunkSize;
  o.tileV = s.tileV;
  o.warps = s.warps;
  std::vector<ScheduleKnob> flags = scheduleFlags();
  std::string rest = s.strategy;
  size_t plus;
  // A suffix this lina does not know (from a newer one) is left off: the
  // kernel differs from the tuned one but computes the same thing.
  while ((plus = rest.rfind('+')) != std::string::npos) {
    std::string suffix = rest.substr(plus + 1);
    rest.resize(plus);
    if (suffix == prefetchSuffix)
      o.prefetch = true;
    if (suffix.rfind(segmentsSuffix, 0) == 0)
      o.segments = std::max<int64_t>(
          1, std::atoll(suffix.c_str() + std::strlen(segmentsSuffix)));
    if (suffix == oldWarpgroupSuffix)
      o.warpgroup = true;
    for (const ScheduleKnob &flag : flags)
      if (suffix == flag.name)
        flag.set(o, 1);
  }
  if (!parseStrategy(rest, o.strategy))
    o.strategy = Strategy::FusedScan;
  return o;
}

} // namespace lina
