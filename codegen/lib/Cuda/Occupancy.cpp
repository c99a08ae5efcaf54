//===- Occupancy.cpp - The CTAs an SM the scan asks ptxas for ----------===//
//
// Part of lina. lina-occupancy: for each lina.chunked, the minimum of CTAs
// an SM the kernel that walks the chunks asks ptxas to fit (the `min_ctas`
// of its #lina.placement, the kernel's __launch_bounds__ minimum): three
// for an additive rule's bf16 split scan of 16-token chunks and 32 value
// columns on eight warps (80 registers, which its loop fits without
// spills); one where its shared memory leaves room for a single CTA (else
// ptxas aims at an occupancy it cannot have and spills); two where the
// schedule says `two_ctas`; else none, the register count left to ptxas.
// The chunk-parallel kernel beside it (the split strategy's prepare kernel,
// the materialize strategy's output kernel) asks for one where its shared
// memory leaves room for a single CTA, else none (`parallel_min_ctas`).
// The emitter prints the recorded minimums and only those.
//
//===----------------------------------------------------------------------===//
#include "lina/Codegen/Passes.h"

#include "WalkingKernelChoice.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

namespace lina {
namespace {

struct LinaOccupancy
    : public PassWrapper<LinaOccupancy, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(LinaOccupancy)

  StringRef getArgument() const final { return "lina-occupancy"; }
  StringRef getDescription() const final {
    return "Decide the CTAs an SM the kernels of each lina.chunked ask "
           "ptxas to fit (placement <min_ctas = ..., parallel_min_ctas = "
           "...>)";
  }
  void getDependentDialects(DialectRegistry &registry) const final {
    registry.insert<LinaDialect>();
  }

  void runOnOperation() final {
    getOperation().walk([&](ChunkedOp op) {
      // Chosen afresh from the schedule and the layout, which the ring and
      // the state's home (recorded before) shape.
      std::optional<cuda::WalkingKernelChoice> choice =
          cuda::chooseWalkingKernel(op);
      PlacementAttr placement = placementOf(op);
      setPlacement(op, placement.getState(), placement.getRing(),
                   choice ? choice->minCTAs : 0,
                   choice ? choice->parallelMinCTAs : 0);
    });
  }
};

} // namespace

std::unique_ptr<Pass> createLinaOccupancy() {
  return std::make_unique<LinaOccupancy>();
}

} // namespace lina
