//===- SearchSpace.cpp - The schedules a tune considers ----------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/SearchSpace.h"
#include "lina/Autotune/ScheduleKnobs.h"

#include <algorithm>

namespace lina {

namespace {

/// Plans `c` and records why it cannot run here, if it cannot.
void prune(const Spec &spec, const DeviceLimits &limits, SpaceCandidate &c) {
  if (spec.valueDim % c.schedule.tileV != 0) {
    c.pruned = "tile-v does not divide value_dim";
    return;
  }
  if (c.schedule.wgmma && limits.arch != "sm_90") {
    c.pruned = "wgmma needs an sm_90 GPU (this is " + limits.arch + ")";
    return;
  }
  // The wgmma scan always has the next chunk in flight (TMA): without the
  // prefetch flag it is the same kernel, which would be timed twice.
  if (c.schedule.wgmma && !c.schedule.prefetch) {
    c.pruned = "wgmma: the same kernel as with prefetch (its loads always "
               "run a chunk ahead)";
    return;
  }
  // Planning runs every pass and the emitter: what it refuses (tile sizes,
  // shared memory over 227 KiB) never gets compiled.
  Expected<KernelPlan> plan = planChunkKernel(spec, c.schedule);
  if (!plan.ok()) {
    c.pruned = plan.message().substr(0, plan.message().find('\n'));
    return;
  }
  c.sharedBytes = std::max({plan->scanSharedBytes, plan->outputSharedBytes,
                            plan->prepareSharedBytes});
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

std::vector<SpaceCandidate> enumerateCandidates(const Spec &spec,
                                                const DeviceLimits &limits) {
  std::vector<ScheduleKnob> knobs = scheduleKnobs(spec);
  std::vector<SpaceCandidate> out;
  for (const ScheduleKnob &k : knobs)
    if (k.values.empty()) // e.g. value_dim < 16: no tile-v to try
      return out;
  // An odometer over the knobs, the last one turning fastest.
  std::vector<size_t> index(knobs.size(), 0);
  while (true) {
    SpaceCandidate c;
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
