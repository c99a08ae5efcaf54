//===- PipelineLoads.cpp - Fetch the next chunks' tiles ahead ----------===//
//
// Part of lina. lina-pipeline-loads: for each lina.chunked whose schedule
// asks for prefetch, how many buffers each tile the kernel that walks the
// chunks fetches ahead gets (the `ring` of its #lina.placement): three
// (copies two chunks ahead) where every tile goes by cp.async and the third
// copies cost no CTA that matters, two where they keep a second CTA an SM,
// else one; none where the buffers do not fit. The emitter prints the
// recorded ring and only that.
//
// A backward's two scans walk the chunks too, one CTA an SM (their state in
// registers fills the register file), and each chunk's loads were a round
// trip to global memory on the chain from one chunk to the next: they
// fetch ahead wherever their rings fit in shared memory beside their tiles,
// whatever the schedule says (the backward's schedule has no prefetch
// knob). The states scan's ring is recorded on the module's lina.chunked,
// whose placement is that scan's (lina-place-state), the reverse scan's
// on the lina.chunked_backward.
//
//===----------------------------------------------------------------------===//
#include "lina/Codegen/Passes.h"

#include "WalkingKernelChoice.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

namespace lina {
namespace {

struct LinaPipelineLoads
    : public PassWrapper<LinaPipelineLoads, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(LinaPipelineLoads)

  StringRef getArgument() const final { return "lina-pipeline-loads"; }
  StringRef getDescription() const final {
    return "Decide the ring of buffers into which the kernel that walks "
           "each lina.chunked's chunks, and a backward's two scans, fetch "
           "the next chunks' tiles (placement <ring = ...>)";
  }
  void getDependentDialects(DialectRegistry &registry) const final {
    registry.insert<LinaDialect>();
  }

  void runOnOperation() final {
    getOperation().walk([&](ChunkedOp op) {
      // Chosen afresh: a ring chosen for an older schedule does not carry
      // over (the choice reads the schedule and the state's home, not the
      // ring).
      std::optional<cuda::WalkingKernelChoice> choice =
          cuda::chooseWalkingKernel(op);
      setPlacement(op, placementOf(op).getState(), choice ? choice->ring : 0,
                   placementOf(op).getMinCtas(),
                   placementOf(op).getParallelMinCtas());
    });
    getOperation().walk([&](ChunkedBackwardOp backward) {
      cuda::BackwardScanRings rings = cuda::chooseBackwardScanRings(backward);
      setPlacement(backward, placementOf(backward).getState(),
                   rings.stateGrads);
      for (ChunkedOp forward : getOperation().getOps<ChunkedOp>())
        setPlacement(forward, placementOf(forward).getState(), rings.states,
                     placementOf(forward).getMinCtas(),
                     placementOf(forward).getParallelMinCtas());
    });
  }
};

} // namespace

std::unique_ptr<Pass> createLinaPipelineLoads() {
  return std::make_unique<LinaPipelineLoads>();
}

} // namespace lina
