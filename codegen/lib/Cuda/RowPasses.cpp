//===- RowPasses.cpp - The prepare kernel's chains of row-wise ops ------===//
//
// Part of lina. lina-row-passes: for each lina.chunked whose schedule
// splits it (a chunk-parallel prepare kernel, then the scan), which of the
// prepare kernel's row-wise ops (l2norm, scale, the decays and weights of
// rows) run as one row pass in registers, a warp a row, instead of a call
// each over a shared-memory tile with a barrier after it, and which loads
// the passes read straight into registers (RowPass.h says when they may).
// Each member and fetched load records its pass's index as `lina.row_pass`;
// the emitter prints the passes as recorded or refuses naming the op.
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

struct LinaRowPasses
    : public PassWrapper<LinaRowPasses, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(LinaRowPasses)

  StringRef getArgument() const final { return "lina-row-passes"; }
  StringRef getDescription() const final {
    return "Decide which row-wise ops of a split chunk's prepare kernel run "
           "as row passes in registers (lina.row_pass on each)";
  }
  void getDependentDialects(DialectRegistry &registry) const final {
    registry.insert<LinaDialect>();
  }

  void runOnOperation() final {
    getOperation().walk([&](ChunkedOp op) {
      // Planned afresh: records of an earlier run go first (the emitter
      // would read them back while planning).
      op.getBody().walk(
          [](Operation *inner) { inner->removeAttr(kRowPassAttr); });
      OpBuilder b(op);
      for (auto [inner, pass] : cuda::chooseRowPasses(op))
        inner->setAttr(kRowPassAttr, b.getI64IntegerAttr(pass));
    });
  }
};

} // namespace

std::unique_ptr<Pass> createLinaRowPasses() {
  return std::make_unique<LinaRowPasses>();
}

} // namespace lina
