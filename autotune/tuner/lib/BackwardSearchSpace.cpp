//===- BackwardSearchSpace.cpp - The backward schedules a tune considers -===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/BackwardSearchSpace.h"

#include <algorithm>

namespace lina {

namespace {

void prune(const Spec &spec, const DeviceLimits &limits,
           BackwardSpaceCandidate &c) {
  if (spec.valueDim % c.schedule.tileV != 0) {
    c.pruned = "tile-v does not divide value_dim";
    return;
  }
  Expected<BackwardPlan> plan = planBackwardKernel(spec, c.schedule);
  if (!plan.ok()) {
    c.pruned = plan.message().substr(0, plan.message().find('\n'));
    return;
  }
  c.sharedBytes = std::max<int64_t>({plan->statesSharedBytes,
                                     plan->stateGradsSharedBytes,
                                     plan->backwardSharedBytes});
  c.threads = plan->threads;
  if (c.sharedBytes > limits.sharedMemoryPerBlockOptin)
    c.pruned = "needs " + std::to_string(c.sharedBytes) +
               " bytes of shared memory; the device allows " +
               std::to_string(limits.sharedMemoryPerBlockOptin);
  else if (c.threads > limits.maxThreadsPerBlock)
    c.pruned = "needs " + std::to_string(c.threads) +
               " threads per block; the device allows " +
               std::to_string(limits.maxThreadsPerBlock);
}

} // namespace

std::vector<BackwardSpaceCandidate>
enumerateBackwardCandidates(const Spec &spec, const DeviceLimits &limits) {
  std::vector<BackwardKnob> knobs = backwardScheduleKnobs(spec);
  std::vector<BackwardSpaceCandidate> out;
  for (const BackwardKnob &k : knobs)
    if (k.values.empty()) // value_dim < 16: no tile-v to try
      return out;
  // An odometer over the knobs, the last one turning fastest.
  std::vector<size_t> index(knobs.size(), 0);
  while (true) {
    BackwardSpaceCandidate c;
    for (size_t k = 0; k < knobs.size(); ++k)
      knobs[k].set(c.schedule, knobs[k].values[index[k]]);
    prune(spec, limits, c);
    out.push_back(std::move(c));
    size_t k = knobs.size();
    while (k > 0 && ++index[k - 1] == knobs[k - 1].values.size())
      index[--k] = 0;
    if (k == 0)
      return out;
  }
}

} // namespace lina
