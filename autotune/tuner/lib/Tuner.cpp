//===- Tuner.cpp - The sweep and the fast search over a schedule space -===//
//
// Part of lina. The forward's schedules through the searches of Search.h.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/Tuner.h"

#include "Search.h"

namespace lina {

namespace {

/// The wgmma scan's layouts (a whole head; for the scans printed from the
/// ops also a 64-column value tile) each go with their own warps: no one
/// knob but wgmma leads from one to a viable schedule, and wgmma off at
/// that layout rarely is one (gdn's fused
/// mma.sync scan at C64 tv128 needs too much shared memory), so a descent
/// from it would end where it began. Its mma.sync counterpart
/// (withoutWarpgroup) is where fast mode walks from.
std::optional<ScheduleOptions> wgmmaCounterpart(const ScheduleOptions &start) {
  if (!start.warpgroup)
    return std::nullopt;
  return withoutWarpgroup(start);
}

const search::Codec<ScheduleOptions> &forwardCodec() {
  static const search::Codec<ScheduleOptions> codec = {
      [](const ScheduleOptions &s) { return toCacheSchedule(s); },
      [](const cache::Schedule &s) { return fromCacheSchedule(s); },
      [](const ScheduleOptions &a, const ScheduleOptions &b) {
        return sameSchedule(a, b);
      },
      wgmmaCounterpart};
  return codec;
}

} // namespace

TuneResult tuneFull(cache::Cache &cache, const cache::TuningKey &key,
                    const std::vector<ScheduleOptions> &viable,
                    const TuneConfig &config) {
  return search::full(cache, key, viable, config, forwardCodec());
}

TuneResult tuneFast(cache::Cache &cache, const cache::TuningKey &key,
                    const std::vector<ScheduleKnob> &knobs,
                    const std::vector<ScheduleOptions> &viable,
                    const ScheduleOptions &start, size_t budget,
                    const TuneConfig &config) {
  return search::fast(cache, key, knobs, viable, start, budget, config,
                      forwardCodec());
}

std::optional<FastVsFull>
compareFastToFull(cache::Cache &cache, const cache::TuningKey &key,
                  const std::vector<ScheduleKnob> &knobs,
                  const std::vector<ScheduleOptions> &viable,
                  const ScheduleOptions &start, size_t budget) {
  return search::compare(cache, key, knobs, viable, start, budget,
                         forwardCodec());
}

} // namespace lina
