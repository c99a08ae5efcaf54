//===- ScheduleOf.h - A chunked op's schedule, or the default ---*- C++ -*-===//
//
// Part of lina. The emitter and the placement passes read the schedule the
// same way, so that IR lina-schedule never saw is placed as it is printed.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_CODEGEN_CUDA_SCHEDULEOF_H
#define LINA_CODEGEN_CUDA_SCHEDULEOF_H

#include "lina/Dialect/Lina/IR/Lina.h"
#include "lina/Spec/Spec.h"

#include <algorithm>

namespace lina::cuda {

/// The op's #lina.schedule; where lina-schedule has not run, value tiles of
/// up to 64 columns, four warps and the fused strategy.
template <typename Op> ScheduleAttr scheduleOf(Op op, const Spec &spec) {
  if (ScheduleAttr schedule = op.getScheduleAttr())
    return schedule;
  return ScheduleAttr::get(
      op.getContext(), std::min<int64_t>(64, spec.valueDim), 4,
      ir::Strategy::fused, false, false, false, false, 1, ir::Mma::warp);
}

} // namespace lina::cuda

#endif // LINA_CODEGEN_CUDA_SCHEDULEOF_H
