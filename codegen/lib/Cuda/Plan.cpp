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
                                            std::string &error, bool backward) {
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
    pm.addPass(createLinaChunkBackward());
  LinaScheduleOptions schedule;
  schedule.tileV = options.tileV;
  schedule.warps = options.warps;
  schedule.strategy = toString(options.strategy);
  schedule.prefetch = options.prefetch;
  schedule.sharedState = options.sharedState;
  schedule.directDecay = options.directDecay;
  schedule.twoCTAs = options.twoCTAs;
  schedule.segments = options.segments;
  schedule.wgmma = options.wgmma;
  pm.addPass(createLinaSchedule(schedule));
  pm.addPass(createLinaCutState());
  pm.addPass(createLinaPlaceState());
  pm.addPass(createLinaPipelineLoads());
  pm.addPass(createLinaOccupancy());
  pm.addPass(createLinaRowPasses());
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
  if (options.wgmma) {
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
  return emitCuda(*module);
}

BackwardScheduleOptions defaultBackwardSchedule(const Spec &spec) {
  // Every tile of the backward's chunk lives in shared memory (no register
  // state yet), so chunks of 16 tokens and 32 value columns a CTA keep the
  // largest bodies (the delta rule's and DPLR's, d128) within one CTA's
  // shared memory; narrower heads take their whole value width. That
  // leaves one CTA an SM, whose warps are all that hides the latency of
  // the body's shared-memory ops: eight, as on the H200 every layout ran
  // faster with more warps (gdn at 4x2048x16: 0.77x the time at 8 warps
  // than at 4 with 32-token chunks), the scans a little slower at 16.
  BackwardScheduleOptions s;
  s.chunkSize = 16;
  s.tileV = std::min<int64_t>(32, spec.valueDim);
  s.warps = 8;
  return s;
}

Expected<BackwardPlan> planBackwardKernel(const Spec &spec,
                                          const BackwardScheduleOptions &asked) {
  BackwardScheduleOptions options = defaultBackwardSchedule(spec);
  if (asked.chunkSize > 0)
    options.chunkSize = asked.chunkSize;
  if (asked.tileV > 0)
    options.tileV = asked.tileV;
  if (asked.warps > 0)
    options.warps = asked.warps;
  ScheduleOptions schedule;
  schedule.chunkSize = options.chunkSize;
  schedule.tileV = options.tileV;
  schedule.warps = options.warps;
  // The forward's scan that writes each chunk's starting state.
  schedule.strategy = Strategy::Materialize;
  MLIRContext ctx;
  std::string error;
  OwningOpRef<ModuleOp> module =
      buildScheduledProgram(ctx, spec, schedule, error, /*backward=*/true);
  if (!module) {
    while (!error.empty() && error.back() == '\n')
      error.pop_back();
    return Status::error(StatusCode::InvalidArgument, error);
  }
  return emitCudaBackward(*module);
}

} // namespace lina
