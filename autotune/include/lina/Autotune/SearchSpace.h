//===- SearchSpace.h - The schedules a tune considers -----------*- C++ -*-===//
//
// Part of lina. The candidate space is the cross product of the schedule
// passes' options (chunk size, tile-v, warps, strategy); each candidate is
// planned (which runs every pass and the emitter) and pruned before anything
// is compiled: divisibility, tensor-core tile sizes, shared memory against
// the device's limit.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_SEARCHSPACE_H
#define LINA_AUTOTUNE_SEARCHSPACE_H

#include "lina/Codegen/KernelPlanner.h"

#include <string>
#include <vector>

namespace lina {

/// What pruning needs to know about the GPU.
struct DeviceLimits {
  int64_t sharedMemoryPerBlockOptin = 232448; ///< H100/H200
  int64_t smCount = 132;
};

struct SpaceCandidate {
  ScheduleOptions schedule;
  int64_t sharedBytes = 0; ///< the larger kernel's, when it planned
  /// Why it cannot run here; empty for a viable candidate.
  std::string pruned;
  bool viable() const { return pruned.empty(); }
};

/// Every schedule of the space for `spec`, viable or pruned (with the
/// reason), in a stable order: strategy, chunk size, tile-v, warps.
std::vector<SpaceCandidate> enumerateCandidates(const Spec &spec,
                                                const DeviceLimits &limits);

/// "C64 tv32 w4 fused": how tables and the cache name a schedule.
std::string describe(const ScheduleOptions &schedule);

} // namespace lina

#endif // LINA_AUTOTUNE_SEARCHSPACE_H
