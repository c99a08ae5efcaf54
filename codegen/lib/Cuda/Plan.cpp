//===- Plan.cpp - Spec + schedule -> KernelPlan ------------------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Codegen/CudaEmitter.h"
#include "lina/Transforms/Passes.h"
#include "lina/Transforms/Pipeline.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"

#include <algorithm>

using namespace mlir;

namespace lina {

ScheduleOptions defaultSchedule(const Spec &spec) {
  ScheduleOptions s;
  // fp32 tiles in shared memory: the chunk x key tiles grow with both, so
  // wide heads take smaller chunks.
  s.chunkSize = spec.keyDim > 64 ? 32 : 64;
  s.tileV = std::min<int64_t>(spec.valueDim, 32);
  // The delta rule at d <= 64: `lina tune` found C32 tv16 w8 split fastest
  // for gdn and kda at 8x1024x8x64 on the H200: 0.250 and 0.379 ms, against
  // 0.281 ms (gdn, C64 tv32 split, compare_fla.py) and 0.628 ms (kda, C64
  // tv32 split, the tune's table); docs/autotune.md. A 64-row chunk also makes
  // the register forward substitution (tri_solve) ten times slower to
  // compile (15 s against 1.5-3 s), which a cold first call waits for.
  if (spec.update == UpdateRule::Delta && spec.keyDim <= 64) {
    s.chunkSize = 32;
    s.tileV = std::min<int64_t>(spec.valueDim, 16);
  }
  while (spec.valueDim % s.tileV != 0)
    s.tileV /= 2;
  // Eight warps: 1x8192x96 gdn took 14.9 ms against 20.2 ms with four
  // (H200, docs/perf-notes.md); the CTA is latency-bound, not issue-bound.
  s.warps = 8;
  // The delta and dplr rules and per-channel gates spend most of a chunk on
  // state-independent work (solves, per-channel decay products), which the
  // split strategy moves off the sequential path: kda 1x8192x96x128 28.3 ->
  // 8.4 ms, gdn 9.1 -> 6.1 ms (H200, docs/perf-notes.md). Additive rules
  // with scalar gates have little of it (retnet: 4.0 vs 4.4 ms).
  bool stateIndependentWork = spec.update != UpdateRule::Additive ||
                              spec.decay == DecayKind::PerChannel;
  s.strategy = stateIndependentWork ? Strategy::Split : Strategy::FusedScan;
  return s;
}

OwningOpRef<ModuleOp> buildScheduledProgram(MLIRContext &ctx, const Spec &spec,
                                            const ScheduleOptions &options,
                                            std::string &error) {
  ChunkOptions chunk;
  chunk.chunkSize = options.chunkSize;
  OwningOpRef<ModuleOp> module = buildChunkedProgram(ctx, spec, chunk, error);
  if (!module)
    return nullptr;
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
    diagnostics += diag.str();
    return success();
  });
  PassManager pm(&ctx);
  LinaScheduleOptions schedule;
  schedule.tileV = options.tileV;
  schedule.warps = options.warps;
  schedule.strategy = toString(options.strategy);
  schedule.prefetch = options.prefetch;
  pm.addPass(createLinaSchedule(schedule));
  if (failed(pm.run(*module))) {
    error = diagnostics;
    return nullptr;
  }
  return module;
}

Expected<KernelPlan> planChunkKernel(const Spec &spec,
                                     const ScheduleOptions &options) {
  MLIRContext ctx;
  std::string error;
  OwningOpRef<ModuleOp> module =
      buildScheduledProgram(ctx, spec, options, error);
  if (!module)
    return Status::error(StatusCode::InvalidArgument, error);
  return emitCuda(*module);
}

} // namespace lina
