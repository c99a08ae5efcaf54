//===- Passes.h - The CUDA target's passes ----------------------*- C++ -*-===//
//
// Part of lina. Passes that place a scheduled chunked program on the GPU's
// resources. They need the CUDA target's tile layouts (value columns split
// into tile-v slices, the register file's accumulator layout), so they live
// with the emitter that reads their records, not in lina/Transforms.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_CODEGEN_PASSES_H
#define LINA_CODEGEN_PASSES_H

#include "lina/Dialect/Lina/IR/Lina.h"

#include "mlir/Pass/Pass.h"

#include <memory>

namespace lina {

/// The discardable attribute lina-place-state sets on a lina.chunked, and
/// its one value: the kernel that walks the chunks keeps the state as the
/// tensor cores' fp32 accumulators of S^T, spread over its warps, instead
/// of a shared-memory tile (codegen/lib/Cuda/RegisterState.h says when that
/// holds). Without it the state is a shared-memory tile.
inline constexpr llvm::StringLiteral kStateAttr = "lina.state";
inline constexpr llvm::StringLiteral kStateInRegisters = "registers";

/// With the state in registers, the part each op of the walking kernel
/// plays in using it (codegen/lib/Cuda/RegisterState.h's stateUse lists
/// the values), on the ops that play one.
inline constexpr llvm::StringLiteral kStateUseAttr = "lina.state_use";

/// The discardable attribute lina-pipeline-loads sets on a lina.chunked:
/// the kernel that walks the chunks fetches the next chunks' tiles while
/// it computes this one, into rings of this many buffers a tile (an i64, 1
/// to 3: 1 fetches the next chunk through registers, 2 and 3 copy one and
/// two chunks ahead straight into shared memory). Without it each chunk
/// loads its tiles when it reaches them.
inline constexpr llvm::StringLiteral kRingAttr = "lina.ring";

/// The ring lina-pipeline-loads recorded on `op`; 0 without one.
inline int64_t fetchRingOf(ChunkedOp op) {
  auto ring = op->getAttrOfType<mlir::IntegerAttr>(kRingAttr);
  return ring ? ring.getInt() : 0;
}

/// Whether lina-place-state put `op`'s state in registers.
inline bool stateInRegisters(ChunkedOp op) {
  auto state = op->getAttrOfType<mlir::StringAttr>(kStateAttr);
  return state && state.getValue() == kStateInRegisters;
}

/// lina-place-state: for each scheduled lina.chunked whose kernel walks
/// the chunks (fused, or the split strategy's scan), decides whether that
/// kernel keeps the state in registers and how its ops use them, and
/// records both (kStateAttr, kStateUseAttr).
std::unique_ptr<mlir::Pass> createLinaPlaceState();

/// lina-pipeline-loads: for each lina.chunked whose schedule asks for
/// `prefetch`, the ring of buffers the kernel that walks the chunks fetches
/// its tiles into, recorded (kRingAttr). Runs after lina-place-state, whose
/// record changes what the kernel keeps in shared memory.
std::unique_ptr<mlir::Pass> createLinaPipelineLoads();

/// Registers the passes above with the pass registry (lina-opt).
void registerLinaCodegenPasses();

} // namespace lina

#endif // LINA_CODEGEN_PASSES_H
