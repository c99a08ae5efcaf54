//===- StateCut.h - Where the split strategy cuts a chunk --------*- C++ -*-===//
//
// Part of lina. The split strategy runs the state-independent part of every
// chunk in a chunk-parallel prepare kernel that writes its results to a
// workspace, and keeps only the part downstream of the state in the
// sequential scan. lina-cut-state decides which values cross that cut and
// records it on the ops that make them (`lina.cut = "stored"`, or
// `"last_row"` where only the last row crosses); the CUDA emitter lays the
// workspace out from the record. Both walk the chunk with these functions.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TRANSFORMS_STATECUT_H
#define LINA_TRANSFORMS_STATECUT_H

#include "lina/Dialect/Lina/IR/Lina.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SetVector.h"

namespace lina {

/// The discardable attribute lina-cut-state sets, and its values.
inline constexpr llvm::StringLiteral kCutAttr = "lina.cut";
enum class Cut {
  None,    ///< computed where it is read (or not by the scan at all)
  Stored,  ///< computed by the prepare kernel, loaded by the scan
  LastRow, ///< likewise, its last valid row alone (gate sums that only
           ///< decay the state)
};
/// The cut recorded on `op`.
Cut cutOf(mlir::Operation *op);

/// The ops downstream of the chunk's state, the yield among them, in program
/// order, and the values they make.
struct StateDependence {
  llvm::SetVector<mlir::Operation *> ops;
  llvm::DenseSet<mlir::Value> values;
};
StateDependence stateDependence(ChunkedOp op);
/// The same for a walk of `body` that carries `carried` and runs only what
/// its yield needs: a backward's states scan (the forward's chunk, carrying
/// the state) and its reverse scan (the backward's chunk, carrying the
/// state's gradient, its last argument).
StateDependence walkDependence(mlir::Block &body, mlir::Value carried);

/// The scan's ops: the state-dependent ones and, walking back through
/// their state-independent operands, every op they need, stopping at ops
/// `crosses` says cross the cut or that `stored` already holds. Those
/// reached and crossing are appended to `stored` in the order the walk
/// reaches them (which is the workspace's order: it must not depend on
/// pointer values).
llvm::DenseSet<mlir::Operation *>
collectScanOps(const StateDependence &dependence,
               llvm::function_ref<bool(mlir::Operation *)> crosses,
               llvm::SetVector<mlir::Operation *> &stored);

} // namespace lina

#endif // LINA_TRANSFORMS_STATECUT_H
