//===- BackwardSearchSpace.cpp - The backward schedules a tune considers -===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/BackwardSearchSpace.h"

#include "SpaceEnumeration.h"

#include <algorithm>

namespace lina {

namespace {

/// Plans `c` and records why it cannot run here, if it cannot.
void prune(const Spec &spec, const DeviceLimits &limits,
           BackwardSpaceCandidate &c) {
  if (spec.valueDim % c.schedule.tileV != 0) {
    c.pruned = space::kTileVDoesNotDivide;
    return;
  }
  Expected<BackwardPlan> plan = planBackwardKernel(spec, c.schedule);
  if (!plan.ok()) {
    c.pruned = space::firstLine(plan.message());
    return;
  }
  c.sharedBytes = plan->sharedBytes();
  c.threads = plan->threads;
  c.pruned = space::exceededLimit(c.sharedBytes, c.threads, limits);
}

} // namespace

std::vector<BackwardSpaceCandidate>
enumerateBackwardCandidates(const Spec &spec, const DeviceLimits &limits) {
  return space::enumerate(backwardScheduleKnobs(spec),
                          [&](BackwardSpaceCandidate &c) {
                            prune(spec, limits, c);
                          });
}

} // namespace lina
