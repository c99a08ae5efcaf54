//===- Plan.cpp - Spec + schedule -> KernelPlan ------------------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "WgmmaScan.h"
#include "lina/Codegen/CudaEmitter.h"
#include "lina/Codegen/Passes.h"
#include "lina/Runtime/KernelForms.h"
#include "lina/Transforms/Passes.h"
#include "lina/Transforms/Pipeline.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"

#include <algorithm>

using namespace mlir;

namespace lina {

OwningOpRef<ModuleOp> buildScheduledProgram(MLIRContext &ctx, const Spec &spec,
                                            const ScheduleOptions &options,
                                            std::string &error, bool backward,
                                            int64_t barrierWindow) {
  ChunkOptions chunk;
  chunk.chunkSize = options.chunkSize;
  OwningOpRef<ModuleOp> module = buildChunkedProgram(ctx, spec, chunk, error);
  if (!module)
    return nullptr;
  // With a backward the schedule pass checks the forward and the backward
  // alike: the first complaint says it for both.
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
    if (diagnostics.empty())
      diagnostics = diag.str();
    return success();
  });
  PassManager pm(&ctx);
  if (backward)
    addBackwardPasses(pm);
  LinaScheduleOptions schedule;
  schedule.tileV = options.tileV;
  schedule.warps = options.warps;
  schedule.strategy = toString(options.strategy);
  schedule.prefetch = options.prefetch;
  schedule.sharedState = options.sharedState;
  schedule.directDecay = options.directDecay;
  schedule.twoCTAs = options.twoCTAs;
  schedule.segments = options.segments;
  schedule.mma = options.warpgroup ? "warpgroup" : "warp";
  pm.addPass(createLinaSchedule(schedule));
  pm.addPass(createLinaCutState());
  pm.addPass(createLinaPlaceState());
  pm.addPass(createLinaPipelineLoads());
  pm.addPass(createLinaOccupancy());
  pm.addPass(createLinaRowPasses());
  pm.addPass(createLinaSolveResidual());
  pm.addPass(createLinaWarpgroupRoles());
  pm.addPass(createLinaWarpgroupGroups());
  pm.addPass(createLinaWarpgroupRecord());
  if (backward) {
    pm.addPass(createLinaGroupBarriers(barrierWindow));
    pm.addPass(createLinaPackStates());
    pm.addPass(createLinaGlobalTiles());
  }
  if (failed(pm.run(*module))) {
    error = diagnostics;
    return nullptr;
  }
  return module;
}

Expected<KernelPlan> planChunkKernel(const Spec &spec,
                                     const ScheduleOptions &options) {
  // The wgmma scan asked for where it does not apply: its reason, naming
  // the field, before the schedule pass's complaint about the layout it
  // implies (tile-v 128 on a d64 head).
  if (options.warpgroup) {
    std::string refusal = cuda::wgmmaScanRefusal(
        specializedSpec(spec), options.chunkSize, options.tileV,
        options.warps * 32);
    if (!refusal.empty())
      return Status::error(StatusCode::InvalidArgument, refusal);
  }
  MLIRContext ctx;
  std::string error;
  OwningOpRef<ModuleOp> module =
      buildScheduledProgram(ctx, spec, options, error);
  if (!module)
    return Status::error(StatusCode::InvalidArgument, error);
  Expected<KernelPlan> plan = emitCuda(*module);
  if (plan.ok())
    plan->written = spec;
  return plan;
}

OwningOpRef<ModuleOp> buildBackwardProgram(MLIRContext &ctx, const Spec &spec,
                                           const BackwardScheduleOptions &asked,
                                           std::string &error) {
  BackwardScheduleOptions options = defaultBackwardSchedule(spec);
  if (asked.chunkSize > 0)
    options.chunkSize = asked.chunkSize;
  if (asked.tileV > 0)
    options.tileV = asked.tileV;
  if (asked.warps > 0)
    options.warps = asked.warps;
  if (asked.barrierWindow < 0) {
    error = "the backward's barrier window must not be negative (0: no "
            "grouping)";
    return nullptr;
  }
  options.barrierWindow = asked.barrierWindow;
  ScheduleOptions schedule;
  schedule.chunkSize = options.chunkSize;
  schedule.tileV = options.tileV;
  schedule.warps = options.warps;
  // The forward's scan that writes each chunk's starting state.
  schedule.strategy = Strategy::Materialize;
  OwningOpRef<ModuleOp> module = buildScheduledProgram(
      ctx, spec, schedule, error, /*backward=*/true, options.barrierWindow);
  while (!module && !error.empty() && error.back() == '\n')
    error.pop_back();
  return module;
}

Expected<BackwardPlan>
planBackwardKernel(const Spec &spec, const BackwardScheduleOptions &asked) {
  MLIRContext ctx;
  std::string error;
  OwningOpRef<ModuleOp> module = buildBackwardProgram(ctx, spec, asked, error);
  if (!module)
    return Status::error(StatusCode::InvalidArgument, error);
  Expected<BackwardPlan> plan = emitCudaBackward(*module);
  if (plan.ok())
    plan->written = spec;
  return plan;
}

} // namespace lina
