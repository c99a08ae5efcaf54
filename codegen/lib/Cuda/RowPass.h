//===- RowPass.h - Chains of row-wise ops done in registers ------*- C++ -*-===//
//
// Part of lina. A chunk-parallel kernel (the split strategy's prepare kernel)
// does most of its work as row-wise ops over the chunk's q, k and v: l2norm,
// scale, the decays of rows, the weights of rows. Printed one call each, every
// op reads and writes a whole fp32 tile in shared memory with a barrier after
// it, and the kernel is bound by the shared-memory pipe. A row pass runs a
// chain of them in registers instead (Prelude.cuh's "Row passes"): a warp per
// row, the input rows fetched from global memory into registers at the top of
// the kernel, only the values other ops read written to shared memory, and
// the values the scan needs stored straight from registers to the workspace.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_CODEGEN_CUDA_ROWPASS_H
#define LINA_CODEGEN_CUDA_ROWPASS_H

#include "TileLayout.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

#include <vector>

namespace lina::cuda {

struct RowPass {
  /// The row-wise ops, in an order that respects their dependences; all of
  /// one tile shape. The pass is printed where its last member is.
  llvm::SmallVector<mlir::Operation *, 8> members;
  /// Loads whose rows the pass reads from registers: they stay at the top
  /// of the kernel, fetched into registers instead of copied to a tile.
  llvm::SmallVector<mlir::Operation *, 2> fetched;
  /// Member results and fetched loads some op outside the pass reads:
  /// written to their tiles by the pass.
  llvm::DenseSet<mlir::Value> toShared;
  /// Tiles the pass reads from shared memory: operands of its members that
  /// are neither members' results nor fetched rows (including the gates
  /// and weights of rows).
  llvm::SmallVector<mlir::Value, 4> reads;

  mlir::Operation *last() const { return members.back(); }
};

struct RowPlan {
  std::vector<RowPass> passes;
  /// The pass of each member and fetched load.
  llvm::DenseMap<mlir::Operation *, unsigned> passOf;
  /// The kernel's ops in the order it runs them: each pass's members in a
  /// row, fetched loads where the loads were.
  llvm::SetVector<mlir::Operation *> order;

  const RowPass *passOfMember(mlir::Operation *inner) const;
  bool isFetched(mlir::Operation *inner) const;
};

/// The row passes of a chunk-parallel kernel running `ops` (scheduled).
/// `fetchable` says which loads may be fetched into registers (the printer
/// knows which are whole rows of an input tensor). A pass has at least two
/// ops, counting fetched loads; a row-wise op left alone is printed as a
/// call of its own.
RowPlan planRowPasses(const llvm::SetVector<mlir::Operation *> &ops,
                      const llvm::DenseMap<mlir::Value, TileShape> &shapes,
                      llvm::function_ref<bool(mlir::Operation *)> fetchable);

/// Whether `inner` is an op a row pass can do, on tiles of `shape`:
/// l2norm, scale, neg, add, sub, scale_rows, decay_rows (or a load), with
/// a warp's lanes taking 1, 2, 4 or 8 columns each (32 to 256 columns, a
/// power of two).
bool isRowWise(mlir::Operation *inner, const TileShape &shape);

} // namespace lina::cuda

#endif // LINA_CODEGEN_CUDA_ROWPASS_H
