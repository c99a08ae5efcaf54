//===- GlobalTiles.cpp - A backward's tiles kept in global memory -------===//
//
// Part of lina. lina-global-tiles: a backward's chunk keeps the forward's
// chunk and its adjoints alive at once, often more tiles than a CTA's shared
// memory holds. For each scheduled lina.chunked_backward, the tiles each of
// its kernels keeps in global memory instead (a per-CTA region; each call
// on one waits on L2): the least touched, chosen by TileLayout.h's
// chooseGlobalTiles until the rest fit. Each such op records the kernels as
// `lina.in_global`; the emitter lays the tiles out as recorded and refuses a
// kernel that does not fit without records.
//
//===----------------------------------------------------------------------===//
#include "lina/Codegen/Passes.h"

#include "WalkingKernelChoice.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

namespace lina {
namespace {

struct LinaGlobalTiles
    : public PassWrapper<LinaGlobalTiles, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(LinaGlobalTiles)

  StringRef getArgument() const final { return "lina-global-tiles"; }
  StringRef getDescription() const final {
    return "Decide which tiles each lina.chunked_backward's kernels keep in "
           "global memory where shared memory cannot hold them all "
           "(lina.in_global on their ops)";
  }
  void getDependentDialects(DialectRegistry &registry) const final {
    registry.insert<LinaDialect>();
  }

  void runOnOperation() final {
    getOperation().walk([&](ChunkedBackwardOp op) {
      // Planned afresh: the emitter would read an earlier run's records.
      op.getBody().walk(
          [](Operation *inner) { inner->removeAttr(kInGlobalAttr); });
      OpBuilder b(op);
      for (auto &[inner, kernels] : cuda::chooseBackwardGlobalTiles(op))
        inner->setAttr(kInGlobalAttr, b.getStrArrayAttr(kernels));
    });
  }
};

} // namespace

std::unique_ptr<Pass> createLinaGlobalTiles() {
  return std::make_unique<LinaGlobalTiles>();
}

} // namespace lina
