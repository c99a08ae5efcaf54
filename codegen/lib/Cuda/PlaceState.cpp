//===- PlaceState.cpp - Where the kernel that walks the chunks keeps S --===//
//
// Part of lina. lina-place-state: for each scheduled lina.chunked, whether
// the kernel that walks the chunks (the fused kernel, or the split
// strategy's scan) keeps the state in registers, recorded in the op's
// placement (`placement <state = registers>`), and the part each of its ops
// plays in using them (`lina.state_use`; lina/Codegen/Passes.h); the same
// for each lina.chunked_backward's reverse scan and the state's gradient it
// carries. The emitter prints the register-resident state where the record
// says so and only as it says.
//
//===----------------------------------------------------------------------===//
#include "lina/Codegen/Passes.h"
#include "lina/Dialect/Lina/IR/SpecConversion.h"

#include "RegisterState.h"
#include "ScheduleOf.h"
#include "StateSplit.h"
#include "TileLayout.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

namespace lina {
namespace {

/// The ops of the kernel that walks `op`'s chunks under `strategy`, in the
/// order it runs them; empty for the materialize strategy, whose scan only
/// carries the state from chunk to chunk through a workspace, except in a
/// backward's module: there it is the backward's states scan, which writes
/// the state before every chunk and runs what lina-cut-state left it.
llvm::SetVector<Operation *> walkingKernelOps(ChunkedOp op,
                                              ir::Strategy strategy,
                                              const Spec &spec) {
  Block &body = op.getBody().front();
  auto module = op->getParentOfType<ModuleOp>();
  if (strategy == ir::Strategy::materialize && module &&
      !module.getOps<ChunkedBackwardOp>().empty()) {
    llvm::DenseMap<Value, cuda::TileShape> fullShapes;
    std::string error;
    if (!cuda::computeShapes(op, spec.valueDim, fullShapes, error))
      return {};
    return cuda::walkSplit(body, body.getArgument(0), fullShapes, spec).scanOps;
  }
  if (strategy == ir::Strategy::fused) {
    SmallVector<Operation *> all;
    for (Operation &inner : body)
      all.push_back(&inner);
    return cuda::backwardSlice(op, all);
  }
  if (strategy != ir::Strategy::split)
    return {};
  // The scan's share of the chunk follows lina-cut-state's record; the
  // prepare kernel's shapes (a value tile spanning value_dim) only lay out
  // the workspace, which the placement does not read.
  llvm::DenseMap<Value, cuda::TileShape> fullShapes;
  std::string error;
  if (!cuda::computeShapes(op, spec.valueDim, fullShapes, error))
    return {};
  return cuda::splitAtState(op, fullShapes, spec.dtype != DType::F32).scanOps;
}

/// Records the part each of `ops` plays in `plan` (lina.state_use).
void recordStateUses(const cuda::RegisterState &plan,
                     const llvm::SetVector<Operation *> &ops) {
  for (Operation *inner : ops)
    if (StringRef use = cuda::stateUse(plan, inner); !use.empty())
      inner->setAttr(kStateUseAttr, StringAttr::get(inner->getContext(), use));
}

/// Drops the records an earlier run left in `op`'s body.
void forgetStateUses(Operation *op) {
  op->getRegion(0).walk(
      [](Operation *inner) { inner->removeDiscardableAttr(kStateUseAttr); });
}

/// Places `op`'s state: in registers where its walking kernel can and
/// should keep it there, recording how each op uses them; else nothing is
/// recorded. Registers need tensor-core products (not f32, whose products
/// run on the CUDA cores), a schedule that does not keep the state in
/// shared memory (`shared_state`, for comparison) or print the
/// hand-written warpgroup scan (which places its own state), and every use
/// of the state one RegisterState.h allows, with a value tile and warp
/// count whose accumulators tile.
void place(ChunkedOp op) {
  Spec spec = toSpec(op.getSpec());
  ScheduleAttr schedule = cuda::scheduleOf(op, spec);
  if (spec.dtype == DType::F32 || schedule.getSharedState() ||
      schedule.getMma() == ir::Mma::warpgroup)
    return;
  llvm::SetVector<Operation *> ops =
      walkingKernelOps(op, schedule.getStrategy(), spec);
  if (ops.empty())
    return;
  llvm::DenseMap<Value, cuda::TileShape> shapes;
  std::string error;
  if (!cuda::computeShapes(op, schedule.getTileV(), shapes, error))
    return; // the emitter reports it
  std::optional<cuda::RegisterState> plan = cuda::planRegisterState(
      op, ops, shapes, schedule.getTileV(), schedule.getWarps());
  if (!plan)
    return;
  setPlacement(op, ir::StateHome::registers, fetchRingOf(op),
               placementOf(op).getMinCtas(),
               placementOf(op).getParallelMinCtas());
  recordStateUses(*plan, ops);
}

/// Places a backward's state gradient the same way, for its reverse scan:
/// the ops that reach the yield and are not cut to its prepare kernel (as
/// the emitter prints it; lina-cut-state's record). The gradient's update
/// adds products Y^T Z (Q^T dO, K^T dV) to the decayed gradient, which the
/// accumulators take as they take the forward's K^T V.
void place(ChunkedBackwardOp op) {
  Spec spec = toSpec(op.getSpec());
  ScheduleAttr schedule = cuda::scheduleOf(op, spec);
  // (A backward's schedule is its tile and warps only: no shared_state.)
  if (spec.dtype == DType::F32 || !schedule)
    return;
  Block &body = op.getBody().front();
  llvm::DenseMap<Value, cuda::TileShape> fullShapes, shapes;
  std::string error;
  if (!cuda::computeShapes(body, spec.valueDim, fullShapes, error) ||
      !cuda::computeShapes(body, schedule.getTileV(), shapes, error))
    return; // the emitter reports it
  Value grad = body.getArguments().back();
  llvm::SetVector<Operation *> ops =
      cuda::walkSplit(body, grad, fullShapes, spec).scanOps;
  std::optional<cuda::RegisterState> plan = cuda::planRegisterState(
      grad, spec.keyDim, ops, shapes, schedule.getTileV(), schedule.getWarps());
  if (!plan)
    return;
  setPlacement(op, ir::StateHome::registers, fetchRingOf(op));
  recordStateUses(*plan, ops);
}

struct LinaPlaceState
    : public PassWrapper<LinaPlaceState, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(LinaPlaceState)

  StringRef getArgument() const final { return "lina-place-state"; }
  StringRef getDescription() const final {
    return "Decide whether the kernel that walks each lina.chunked's chunks "
           "keeps the state in registers, and how each op uses them "
           "(placement <state = ...>, lina.state_use)";
  }
  void getDependentDialects(DialectRegistry &registry) const final {
    registry.insert<LinaDialect>();
  }

  void runOnOperation() final {
    getOperation().walk([&](ChunkedOp op) {
      // Placed afresh: a schedule changed since an earlier run may rule
      // the registers out.
      setPlacement(op, ir::StateHome::shared, fetchRingOf(op),
                   placementOf(op).getMinCtas(),
                   placementOf(op).getParallelMinCtas());
      forgetStateUses(op);
      place(op);
    });
    getOperation().walk([&](ChunkedBackwardOp op) {
      op.removePlacementAttr();
      forgetStateUses(op);
      place(op);
    });
  }
};

} // namespace

std::unique_ptr<Pass> createLinaPlaceState() {
  return std::make_unique<LinaPlaceState>();
}

void registerLinaCodegenPasses() {
  PassRegistration<LinaPlaceState>();
  registerPass([] { return createLinaPipelineLoads(); });
  registerPass([] { return createLinaOccupancy(); });
  registerPass([] { return createLinaRowPasses(); });
  registerPass([] { return createLinaPackStates(); });
  registerPass([] { return createLinaGroupBarriers(); });
  registerPass([] { return createLinaWarpgroupRoles(); });
  registerPass([] { return createLinaWarpgroupGroups(); });
  registerPass([] { return createLinaWarpgroupRecord(); });
  registerPass([] { return createLinaGlobalTiles(); });
  registerPass([] { return createLinaChooseSchedule(); });
}

} // namespace lina
