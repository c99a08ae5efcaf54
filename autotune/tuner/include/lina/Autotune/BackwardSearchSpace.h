//===- BackwardSearchSpace.h - The backward schedules a tune considers -*- C++ -*-===//
//
// Part of lina. The cross product of the backward's knobs
// (backwardScheduleKnobs), each candidate planned (planBackwardKernel runs
// lina-chunk-backward, lina-schedule and the emitter) and pruned before
// anything is compiled: a tile-v that does not divide value_dim, whatever
// the planner refuses (tiles the tensor-core products cannot take, shared
// memory past what one CTA may have), and shared memory or threads past
// this device's limits. Registers are known only after compiling; the
// tune's trial prunes on them then.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_BACKWARDSEARCHSPACE_H
#define LINA_AUTOTUNE_BACKWARDSEARCHSPACE_H

#include "lina/Autotune/BackwardTuning.h"
#include "lina/Autotune/DeviceLimits.h"

#include <string>
#include <vector>

namespace lina {

struct BackwardSpaceCandidate {
  BackwardScheduleOptions schedule;
  int64_t sharedBytes = 0; ///< the larger kernel's, when it planned
  int64_t threads = 0;     ///< per CTA, when it planned
  /// Why it cannot run here (the planner's first line, or the limit it
  /// passes); empty for a viable candidate.
  std::string pruned;
  bool viable() const { return pruned.empty(); }
};

/// Every backward schedule of the space for `spec`, viable or pruned with
/// the reason, in a stable order: the knobs' cross product, chunk size
/// outermost.
std::vector<BackwardSpaceCandidate>
enumerateBackwardCandidates(const Spec &spec, const DeviceLimits &limits);

} // namespace lina

#endif // LINA_AUTOTUNE_BACKWARDSEARCHSPACE_H
