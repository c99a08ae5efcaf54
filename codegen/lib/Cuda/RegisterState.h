//===- RegisterState.h - Whether a scan's state fits in registers -*- C++
//-*-===//
//
// Part of lina. A kernel that walks the chunks may keep its state in
// registers (the device library's reg_state) instead of a shared-memory
// tile, when everything the chunk does with the state is one of:
//   - a product X S (the state as the right operand),
//   - decay_state, in place,
//   - S + T, where T is a K x tile-v tile or a product Y^T Z read by
//     nothing else (then folded: S^T += Z^T Y on the accumulators),
// in program order along one chain from the block argument to the yield.
// This file decides that and what the kernel then reads from shared memory.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_CODEGEN_CUDA_REGISTERSTATE_H
#define LINA_CODEGEN_CUDA_REGISTERSTATE_H

#include "TileLayout.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace lina::cuda {

struct RegisterState {
  /// The state along the chunk: the block argument and every decayed or
  /// updated state up to the yield. None of them has a shared-memory tile.
  llvm::DenseSet<mlir::Value> values;
  /// Products X S that read the state from registers.
  llvm::DenseSet<mlir::Operation *> products;
  /// For an add S + Y^T Z, the product Y^T Z it folds in; that product is
  /// never computed as a tile (it prints nothing).
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> foldedInto;
  llvm::DenseSet<mlir::Operation *> folded;
  /// Floats of shared memory the products' partial sums need (warps that
  /// split the key columns add theirs there); 0 when no warp splits them.
  int64_t scratchFloats = 0;

  /// The shared-memory tiles `inner` reads under this plan: its operands
  /// minus the state, nothing for a folded product, the folded product's
  /// operands for the add that folds it.
  llvm::SmallVector<mlir::Value, 4> tileReads(mlir::Operation *inner) const;
  /// Whether `v` has a shared-memory tile under this plan.
  bool inSharedMemory(mlir::Value v) const;
};

/// The register-resident plan for a scan running `ops` (in order) with
/// `warps` warps on value tiles of `tileV` columns, or nullopt when the
/// state's uses or the tile shape rule it out (the scan then keeps the
/// state in shared memory).
std::optional<RegisterState>
planRegisterState(ChunkedOp op, const llvm::SetVector<mlir::Operation *> &ops,
                  const llvm::DenseMap<mlir::Value, TileShape> &shapes,
                  int64_t tileV, int64_t warps);

} // namespace lina::cuda

#endif // LINA_CODEGEN_CUDA_REGISTERSTATE_H
