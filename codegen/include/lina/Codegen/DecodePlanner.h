//===- DecodePlanner.h - From a spec to a DecodePlan ------------*- C++ -*-===//
//
// Part of lina. The decode half of the JIT: spec -> lina.recurrence ->
// lina-specialize -> the recurrent form printed as CUDA C++ (Decode.cuh plus
// the spec as constants), as a DecodePlan the runtime compiles and launches.
// Safe to call from several threads (each call has its own MLIRContext).
//
//===----------------------------------------------------------------------===//
#ifndef LINA_CODEGEN_DECODEPLANNER_H
#define LINA_CODEGEN_DECODEPLANNER_H

#include "lina/Runtime/DecodeKernel.h"
#include "lina/Spec/Spec.h"

namespace lina {

/// Checks the spec and the schedule, specializes the spec through the
/// dialect and prints the kernels: one per warp-column width the schedule
/// allows (all of decodeWarpColumnChoices when it leaves the width to the
/// batch size). Errors name the field or knob and the fix.
Expected<DecodePlan> planDecodeKernel(const Spec &spec,
                                      const DecodeSchedule &schedule = {});

/// The CUDA C++ of the recurrent form for an already specialized `spec`,
/// with a kernel named `kernelNames[i]` per width `warpColumns[i]` and its
/// [V, K]-state twin, the same name + kDecodeVFirstSuffix. No text
/// from the spec reaches the source: only enum-chosen integers, bounded
/// integers and finite floats.
std::string printDecodeSource(const Spec &spec,
                              const std::vector<int64_t> &warpColumns,
                              const std::vector<std::string> &kernelNames);

} // namespace lina

#endif // LINA_CODEGEN_DECODEPLANNER_H
