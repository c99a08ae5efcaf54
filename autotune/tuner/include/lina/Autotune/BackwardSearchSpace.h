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
#include "lina/Autotune/SpaceCandidate.h"

#include <string>
#include <vector>

namespace lina {

using BackwardSpaceCandidate = BasicSpaceCandidate<BackwardScheduleOptions>;

/// Every backward schedule of the space for `spec`, viable or pruned with
/// the reason, in a stable order: the knobs' cross product, chunk size
/// outermost.
std::vector<BackwardSpaceCandidate>
enumerateBackwardCandidates(const Spec &spec, const DeviceLimits &limits);

} // namespace lina

#endif // LINA_AUTOTUNE_BACKWARDSEARCHSPACE_H
