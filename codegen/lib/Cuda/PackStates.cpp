//===- PackStates.cpp - A backward's chunk states kept in bf16 ----------===//
//
// Part of lina. lina-pack-states: the chunk-parallel gradients kernel of a
// lina.chunked_backward reads each chunk's starting state and the gradient
// of its last state from the workspace, where a bf16 spec keeps them in
// bf16. Where only tensor-core products (through ldmatrix) and row dots
// read one, the kernel keeps it so in shared memory, packed: the values an
// fp32 tile would hold, in half the floats, and room for tiles that would
// go to global memory. The op records the states so kept as
// `lina.packed_states`; lina-global-tiles, after it, and the emitter lay
// them out as recorded, and the emitter refuses a record its kernel cannot
// honour.
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

struct LinaPackStates
    : public PassWrapper<LinaPackStates, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(LinaPackStates)

  StringRef getArgument() const final { return "lina-pack-states"; }
  StringRef getDescription() const final {
    return "Decide which chunk states each lina.chunked_backward's gradients "
           "kernel keeps packed in bf16 (lina.packed_states)";
  }
  void getDependentDialects(DialectRegistry &registry) const final {
    registry.insert<LinaDialect>();
  }

  void runOnOperation() final {
    getOperation().walk([&](ChunkedBackwardOp op) {
      // Planned afresh: the chooser would read an earlier run's record.
      op->removeAttr(kPackedStatesAttr);
      llvm::SmallVector<int64_t, 2> packed = cuda::choosePackedStates(op);
      if (!packed.empty())
        op->setAttr(kPackedStatesAttr,
                    DenseI64ArrayAttr::get(op.getContext(), packed));
    });
  }
};

} // namespace

std::unique_ptr<Pass> createLinaPackStates() {
  return std::make_unique<LinaPackStates>();
}

} // namespace lina
