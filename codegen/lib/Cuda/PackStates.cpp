//===- PackStates.cpp - A backward's chunk states kept in bf16 ----------===//
//
// Part of lina. lina-pack-states: the chunk-parallel gradients kernel of a
// lina.chunked_backward reads each chunk's starting state and the gradient
// of its last state from the workspace, where a bf16 spec keeps them in
// bf16. Where only tensor-core products (through ldmatrix) and row dots
// read one, the kernel keeps it so in shared memory, packed: the values an
// fp32 tile would hold, in half the floats, and room for tiles that would
// go to global memory. The op records the states so kept as
// `lina.packed_states`. Likewise the 16-bit tiles the kernel loads (the
// inputs, dL/do, the values the record holds in bf16) that only
// tensor-core products read: each such op records `lina.packed`. The
// products read half the bytes, and the results do not change (the fp32
// tile held the same 16-bit values). lina-global-tiles, after it, and the
// emitter lay them out as recorded, keep them in shared memory, and the
// emitter refuses a record its kernel cannot honour.
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
    return "Decide which chunk states and loaded tiles each "
           "lina.chunked_backward's gradients kernel keeps packed in 16 bits "
           "(lina.packed_states, lina.packed)";
  }
  void getDependentDialects(DialectRegistry &registry) const final {
    registry.insert<LinaDialect>();
  }

  void runOnOperation() final {
    getOperation().walk([&](ChunkedBackwardOp op) {
      // Planned afresh: the chooser would read an earlier run's record.
      op->removeAttr(kPackedStatesAttr);
      for (Operation &inner : op.getBody().front())
        inner.removeAttr(kPackedAttr);
      cuda::PackedTiles packed = cuda::choosePackedTiles(op);
      if (!packed.states.empty())
        op->setAttr(kPackedStatesAttr,
                    DenseI64ArrayAttr::get(op.getContext(), packed.states));
      for (Operation *load : packed.loads)
        load->setAttr(kPackedAttr, UnitAttr::get(op.getContext()));
    });
  }
};

} // namespace

std::unique_ptr<Pass> createLinaPackStates() {
  return std::make_unique<LinaPackStates>();
}

} // namespace lina
