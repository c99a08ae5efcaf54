//===- CostModel.h - A rough time estimate for a schedule -------*- C++ -*-===//
//
// Part of lina. A deterministic stand-in for the GPU timer: `lina tune
// --simulate` times candidates with it, so the whole tune (recording,
// resuming, the fast mode, the final table) runs and is tested on machines
// without a GPU. Its numbers are not predictions to trust; its results are
// recorded under a GPU named "simulated", which no real device matches.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_COSTMODEL_H
#define LINA_AUTOTUNE_COSTMODEL_H

#include "lina/Autotune/DeviceLimits.h"
#include "lina/Codegen/KernelPlanner.h"

namespace lina {

/// The GPU name simulated tunes are recorded under.
inline constexpr const char *kSimulatedGpu = "simulated";

/// Milliseconds for one forward call of `spec` with `schedule` at B x T,
/// from work per CTA, waves of CTAs over the SMs (blocksPerSM with the
/// planned shared memory and threads) and a cost per sequential chunk;
/// segments (split strategy, rules that can) as the runtime cuts them
/// (segmentPieces), plus the carry's traffic.
double modelMilliseconds(const Spec &spec, const ScheduleOptions &schedule,
                         int64_t batch, int64_t seqLen,
                         const DeviceLimits &limits, int64_t sharedBytes,
                         int64_t threads);

} // namespace lina

#endif // LINA_AUTOTUNE_COSTMODEL_H
