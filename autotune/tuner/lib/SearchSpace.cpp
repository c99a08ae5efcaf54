//===- SearchSpace.cpp - The schedules a tune considers ----------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/SearchSpace.h"

#include "SpaceEnumeration.h"
#include "lina/Autotune/ScheduleKnobs.h"

#include <algorithm>

namespace lina {

namespace {

/// Plans `c` and records why it cannot run here, if it cannot.
void prune(const Spec &spec, const DeviceLimits &limits, SpaceCandidate &c) {
  if (spec.valueDim % c.schedule.tileV != 0) {
    c.pruned = space::kTileVDoesNotDivide;
    return;
  }
  if (c.schedule.warpgroup && limits.arch != "sm_90") {
    c.pruned = "mma warpgroup needs an sm_90 GPU (this is " + limits.arch + ")";
    return;
  }
  // The wgmma scan always has the next chunk in flight (TMA): without the
  // prefetch flag it is the same kernel, which would be timed twice.
  if (c.schedule.warpgroup && !c.schedule.prefetch) {
    c.pruned =
        "mma warpgroup: the same kernel as with prefetch (its loads always "
        "run a chunk ahead)";
    return;
  }
  // Planning runs every pass and the emitter: what it refuses (tile sizes,
  // shared memory over 227 KiB) never gets compiled.
  Expected<KernelPlan> plan = planChunkKernel(spec, c.schedule);
  if (!plan.ok()) {
    c.pruned = space::firstLine(plan.message());
    return;
  }
  c.sharedBytes = std::max({plan->scanSharedBytes, plan->outputSharedBytes,
                            plan->prepareSharedBytes});
  c.threads = plan->threads;
  c.pruned = space::exceededLimit(c.sharedBytes, c.threads, limits);
}

} // namespace

std::vector<SpaceCandidate> enumerateCandidates(const Spec &spec,
                                                const DeviceLimits &limits) {
  return space::enumerate(scheduleKnobs(spec), [&](SpaceCandidate &c) {
    prune(spec, limits, c);
  });
}

} // namespace lina
