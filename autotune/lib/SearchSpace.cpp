//===- SearchSpace.cpp - The schedules a tune considers ----------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/SearchSpace.h"

#include <algorithm>

namespace lina {

std::string describe(const ScheduleOptions &s) {
  return "C" + std::to_string(s.chunkSize) + " tv" + std::to_string(s.tileV) +
         " w" + std::to_string(s.warps) + " " + toString(s.strategy);
}

std::vector<SpaceCandidate> enumerateCandidates(const Spec &spec,
                                                const DeviceLimits &limits) {
  std::vector<SpaceCandidate> out;
  std::vector<int64_t> tiles;
  for (int64_t tv = 16; tv <= std::min<int64_t>(spec.valueDim, 128); tv *= 2)
    tiles.push_back(tv);
  for (Strategy strategy :
       {Strategy::FusedScan, Strategy::Materialize, Strategy::Split})
    for (int64_t chunk : {16, 32, 64, 128})
      for (int64_t tileV : tiles)
        for (int64_t warps : {2, 4, 8}) {
          SpaceCandidate c;
          c.schedule = {chunk, tileV, warps, strategy};
          if (spec.valueDim % tileV != 0) {
            c.pruned = "tile-v does not divide value_dim";
          } else {
            // Planning runs every pass and the emitter: what it refuses
            // (tile sizes, shared memory over 227 KiB) never gets compiled.
            Expected<KernelPlan> plan = planChunkKernel(spec, c.schedule);
            if (!plan.ok()) {
              c.pruned = plan.message().substr(0, plan.message().find('\n'));
            } else {
              c.sharedBytes = std::max(plan->scanSharedBytes,
                                       plan->outputSharedBytes);
              if (c.sharedBytes > limits.sharedMemoryPerBlockOptin)
                c.pruned = "needs " + std::to_string(c.sharedBytes) +
                           " bytes of shared memory; the device allows " +
                           std::to_string(limits.sharedMemoryPerBlockOptin);
            }
          }
          out.push_back(std::move(c));
        }
  return out;
}

} // namespace lina
