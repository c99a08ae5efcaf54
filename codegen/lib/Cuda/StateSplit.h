//===- StateSplit.h - Which work of a chunk can leave the scan --*- C++ -*-===//
//
// Part of lina. The split strategy runs the state-independent part of every
// chunk (the triangular solves, the intra-chunk decay products, the norms) in
// a chunk-parallel kernel that writes its results to a workspace, and keeps
// only the part downstream of the state in the sequential scan. Which values
// cross the cut through the workspace (and which the scan recomputes,
// cheaper than a round trip through memory) is lina-cut-state's decision,
// recorded in the IR (lina/Transforms/StateCut.h); this file lays the
// workspace out from that record and says which ops each kernel runs.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_CODEGEN_CUDA_STATESPLIT_H
#define LINA_CODEGEN_CUDA_STATESPLIT_H

#include "TileLayout.h"

#include "lina/Spec/Spec.h"
#include "lina/Transforms/StateCut.h"

#include "llvm/ADT/DenseSet.h"

namespace lina::cuda {

struct StateSplit {
  /// Ops whose (single) result goes through the workspace: computed by the
  /// prepare kernel, loaded by the scan.
  llvm::SetVector<mlir::Operation *> stored;
  /// Where each stored result lives in a (chunk slot, value head) record of
  /// `recordFloats` fp32s (a multiple of four, so records stay 16-byte
  /// aligned), rows of `columns` (all value columns, not a tile).
  llvm::DenseMap<mlir::Operation *, int64_t> offset, columns;
  /// The fp32s each stored value takes in the record (whole 16-byte words).
  llvm::DenseMap<mlir::Operation *, int64_t> floats;
  /// Stored in the tensor cores' operand type (Prelude.cuh's mma_t: f16 for
  /// an f16 spec, else bf16), half the bytes: where every reader in the scan
  /// is a tensor-core product, which rounds its operands to that type
  /// anyway, so nothing is lost; and the values of a backward's walks that
  /// are rounded for their size (roundedInRecord).
  llvm::DenseSet<mlir::Operation *> halfStored;
  /// Stored values of a backward's walk that a reader in it takes
  /// elementwise, held in 16 bits all the same (and in halfStored): the
  /// delta rule's solved values U, read by U - W S. Beside the chunk
  /// states the record is the backward's workspace, and U the largest value
  /// in the states scan's share (KDA at 4 x 2048 x 16 x 128: 64 of its 68
  /// MiB in fp32). fla keeps its u in the inputs' dtype too. The gradients
  /// kernel loads the rounded value the scan used (gradientsSplit), so both
  /// differentiate the same chunk.
  llvm::DenseSet<mlir::Operation *> roundedInRecord;
  /// Stored values the scan reads only through decay_state, which takes
  /// the chunk's last valid row of the gate sums: the record keeps that row
  /// alone (the prepare kernel's cumsum, so the scan neither loads the
  /// gates nor sums them on its serial path).
  llvm::DenseSet<mlir::Operation *> lastRowOnly;
  int64_t recordFloats = 0;
  /// Stored values another split's prepare kernel stores (shareRecord):
  /// the scan loads them, this split's prepare kernel neither makes nor
  /// stores them.
  llvm::DenseSet<mlir::Operation *> storedElsewhere;
  /// The ops each kernel runs, scheduled (see scheduleOps).
  llvm::SetVector<mlir::Operation *> prepareOps, scanOps;
};

/// The kernels' shares of the chunk body, cut where lina-cut-state recorded
/// (nothing crosses where it recorded nothing). `fullShapes` are the shapes
/// with one value tile spanning value_dim (the prepare kernel's).
StateSplit splitAtState(ChunkedOp op,
                        const llvm::DenseMap<mlir::Value, TileShape> &fullShapes,
                        bool tensorCores);
/// The same for a walk of `body` that runs `dependence` (StateCut.h's) and
/// what it needs: a backward's scans. A stored value is kept in the tensor
/// cores' operand type where its readers in the scan, and also in
/// `alsoLoading` for a value of a chunk's rows alone (an R x R tile), take
/// it as a product operand; with `roundForSize`, every stored value of the
/// chunk's tokens' rows is (roundedInRecord), R x R tiles and last rows
/// aside.
StateSplit
splitAtState(mlir::Block &body, const StateDependence &dependence,
             const llvm::DenseMap<mlir::Value, TileShape> &fullShapes,
             bool tensorCores,
             const llvm::DenseSet<mlir::Operation *> &alsoLoading = {},
             bool roundForSize = false);
/// A backward's walk of `body` carrying `carried` (the states scan: the
/// forward's chunk and its state; the reverse scan: the backward's chunk and
/// its last argument), split where lina-cut-state recorded: what the
/// emitter prints and lina-place-state places.
StateSplit walkSplit(mlir::Block &body, mlir::Value carried,
                     const llvm::DenseMap<mlir::Value, TileShape> &fullShapes,
                     const Spec &spec);
/// The backward's chunk-parallel gradients kernel's share of the record of
/// `grads` (the reverse scan's split) and, where given, `states` (the states
/// scan's, laid out with it by shareRecord): the values the record holds
/// whole that the kernel reads (or, of `states`, values it computes alike:
/// the delta rule's solved values U), loaded rather than computed again, and
/// the ops the kernel runs (`roots`, its accumulates, and what they need
/// short of the loaded values), scheduled. A value the record holds in the
/// tensor cores' operand type is loaded only where every reader in the
/// kernel takes it as a product operand, which rounds it to that type
/// anyway, so the kernel computes what it did when it made the value
/// itself, or where the scan read it rounded too (roundedInRecord). (A
/// value held as its last row alone is made again.)
StateSplit gradientsSplit(mlir::Block &body, const StateSplit &grads,
                          const StateSplit *states,
                          llvm::ArrayRef<mlir::Operation *> roots,
                          const llvm::DenseMap<mlir::Value, TileShape> &shapes);

/// Lays `second`'s stored values out after `first`'s: one record a (chunk
/// slot, value head) holds both, each split's recordFloats its whole size.
/// A value of `second` that one of `first` computes alike (the same op on
/// alike operands, the chunk's state alike, stored the same way) is not
/// stored twice: `second` loads `first`'s (a backward's two scans both
/// need the chunk's solved keys, say).
void shareRecord(StateSplit &first, StateSplit &second);

} // namespace lina::cuda

#endif // LINA_CODEGEN_CUDA_STATESPLIT_H
