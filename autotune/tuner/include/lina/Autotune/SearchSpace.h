//===- SearchSpace.h - The schedules a tune considers -----------*- C++ -*-===//
//
// Part of lina. The candidate space is the cross product of the schedule
// knobs (ScheduleKnobs.h: strategy, chunk size, tile-v, warps); each
// candidate is planned (which runs every pass and the emitter) and pruned
// before anything is compiled: divisibility, tensor-core tile sizes, threads
// per block, shared memory against the device's opt-in limit. Registers are
// known only after compiling; `lina tune` prunes on them then.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_SEARCHSPACE_H
#define LINA_AUTOTUNE_SEARCHSPACE_H

#include "lina/Autotune/DeviceLimits.h"
#include "lina/Autotune/SpaceCandidate.h"
#include "lina/Codegen/KernelPlanner.h"

#include <string>
#include <vector>

namespace lina {

using SpaceCandidate = BasicSpaceCandidate<ScheduleOptions>;

/// Every schedule of the space for `spec`, viable or pruned (with the
/// reason), in a stable order: the knobs' cross product, outermost first.
std::vector<SpaceCandidate> enumerateCandidates(const Spec &spec,
                                                const DeviceLimits &limits);

} // namespace lina

#endif // LINA_AUTOTUNE_SEARCHSPACE_H
