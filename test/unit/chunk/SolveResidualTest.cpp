//===- SolveResidualTest.cpp - lina-solve-residual keeps the values ------===//
//
// Part of lina. test/Transforms/lina-solve-residual.mlir shows the rewrite;
// this checks that the rewritten chunk computes what the recurrence does:
// every delta rule (no, a fixed, a scalar and a per-channel decay; betas
// given and computed; q and k normalised or not) run by the float64
// executor after the rewrite, against the reference on fresh random inputs,
// with partial chunks, packed sequences and an initial state.
//
//===----------------------------------------------------------------------===//
#include "lina/Codegen/CpuExecutor.h"
#include "lina/Reference/Reference.h"
#include "lina/Spec/Presets.h"
#include "lina/Transforms/Passes.h"
#include "lina/Transforms/Pipeline.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace lina;

namespace {

/// The delta rules: the presets and spellings no preset has.
std::vector<std::pair<std::string, Spec>> deltaSpecs() {
  std::vector<std::pair<std::string, Spec>> specs;
  for (const char *name : {"deltanet", "gdn", "kda"})
    specs.push_back({name, findPreset(name)->spec});
  Spec fixed = findPreset("gdn")->spec;
  fixed.decay = DecayKind::FixedPerHead;
  specs.push_back({"delta rule, fixed decay", fixed});
  Spec computed = findPreset("gdn")->spec;
  computed.beta = BetaSource::TwoSigmoid;
  computed.gate = GateSource::Softplus;
  computed.qkL2Norm = false;
  specs.push_back({"gdn, computed gate and beta, q k as given", computed});
  for (auto &[name, spec] : specs) {
    spec.keyDim = 16;
    spec.valueDim = 16;
    spec.heads = 2;
    spec.valueHeads = 4;
    spec.initialState = true;
  }
  return specs;
}

/// `spec`'s chunked program at 16-token chunks, scheduled for warpgroup
/// products (or not) and run through lina-solve-residual; its tri_solves
/// counted into `solves`.
mlir::OwningOpRef<mlir::ModuleOp> rewritten(mlir::MLIRContext &ctx,
                                            const Spec &spec, bool warpgroup,
                                            int &solves) {
  ChunkOptions chunk;
  chunk.chunkSize = 16;
  std::string error;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      buildChunkedProgram(ctx, spec, chunk, error);
  EXPECT_TRUE(module) << error;
  if (!module)
    return module;
  mlir::PassManager pm(&ctx);
  LinaScheduleOptions schedule;
  schedule.tileV = 16;
  schedule.warps = 4;
  schedule.mma = warpgroup ? "warpgroup" : "warp";
  pm.addPass(createLinaSchedule(schedule));
  pm.addPass(createLinaSolveResidual());
  EXPECT_TRUE(mlir::succeeded(pm.run(*module)));
  solves = 0;
  module->walk([&](TriSolveOp) { ++solves; });
  return module;
}

TEST(SolveResidual, EveryDeltaRuleKeepsItsValues) {
  for (const auto &[name, spec] : deltaSpecs())
    for (bool packed : {false, true}) {
      SCOPED_TRACE(name + (packed ? ", packed" : ""));
      Spec drawn = spec;
      drawn.varlen = packed;
      mlir::MLIRContext ctx;
      int solves = 0;
      mlir::OwningOpRef<mlir::ModuleOp> module =
          rewritten(ctx, drawn, /*warpgroup=*/true, solves);
      ASSERT_TRUE(module);
      // One solve a chunk, of the residual, where there were two.
      EXPECT_EQ(solves, 1);
      ChunkedOp program = *module->getOps<ChunkedOp>().begin();
      // 53 tokens a sequence (a partial last chunk), or three packed
      // sequences, one of a single token.
      std::mt19937_64 rng(packed ? 11 : 7);
      std::vector<int64_t> offsets;
      if (packed)
        offsets = {0, 20, 21, 53};
      reference::Problem problem =
          reference::randomProblem(drawn, packed ? 1 : 2, 53, rng, offsets);
      reference::Result expected = reference::runRecurrent(problem);
      reference::Result actual;
      actual.o.assign(expected.o.size(), NAN);
      std::string error;
      ASSERT_TRUE(executeChunked(program, problem, actual, error)) << error;
      EXPECT_LE(reference::relativeError(actual.o, expected.o), 1e-10);
      EXPECT_LE(
          reference::relativeError(actual.finalState, expected.finalState),
          1e-10);
    }
}

// The split strategy's prepare kernel solves before the state is known:
// without warpgroup products the chunk keeps its two solves.
TEST(SolveResidual, OtherSchedulesKeepBothSolves) {
  mlir::MLIRContext ctx;
  int solves = 0;
  ASSERT_TRUE(
      rewritten(ctx, deltaSpecs()[1].second, /*warpgroup=*/false, solves));
  EXPECT_EQ(solves, 2);
}

} // namespace
