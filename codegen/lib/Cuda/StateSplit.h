//===- StateSplit.h - Which work of a chunk can leave the scan --*- C++ -*-===//
//
// Part of lina. The split strategy runs the state-independent part of every
// chunk (the triangular solves, the intra-chunk decay products, the norms) in
// a chunk-parallel kernel that writes its results to a workspace, and keeps
// only the part downstream of the state in the sequential scan. This file
// decides the cut: which values cross it through the workspace, which the
// scan recomputes because that is cheaper than a round trip through memory.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_CODEGEN_CUDA_STATESPLIT_H
#define LINA_CODEGEN_CUDA_STATESPLIT_H

#include "TileLayout.h"

#include "mlir/IR/Value.h"

#include "llvm/ADT/DenseSet.h"

namespace lina::cuda {

/// X = c Diag(exp(G)) N, or c Diag(exp(G_last - G)) N (`toEnd`), for N a
/// loaded input L or its l2-normalised rows (`normalized`), gate sums G
/// with one column and a constant c: what the scalar-gated rules make of q
/// and k.
struct RowFactor {
  mlir::Operation *source = nullptr; ///< the LoadOp of L
  mlir::Value gates;                 ///< G
  double scale = 1.0;                ///< c
  bool toEnd = false;
  bool normalized = false;
  /// Which C-float column of G's factor table holds X's factors.
  int64_t slot = 0;
};

struct StateSplit {
  /// Ops whose (single) result goes through the workspace: computed by the
  /// prepare kernel, loaded by the scan.
  llvm::SetVector<mlir::Operation *> stored;
  /// Where each stored result lives in a (chunk slot, value head) record of
  /// `recordFloats` fp32s (a multiple of four, so records stay 16-byte
  /// aligned), rows of `columns` (all value columns, not a tile).
  llvm::DenseMap<mlir::Operation *, int64_t> offset, columns;
  /// Stored as bf16: every reader in the scan is a tensor-core product,
  /// which rounds its operands to bf16 anyway, so nothing is lost and half
  /// the bytes move.
  llvm::DenseSet<mlir::Operation *> bf16;
  /// Stored values the scan reads only through decay_state, which takes
  /// the chunk's last valid row of the gate sums: the record keeps that row
  /// alone (the prepare kernel's cumsum, so the scan neither loads the
  /// gates nor sums them on its serial path).
  llvm::DenseSet<mlir::Operation *> lastRowOnly;
  /// Gate sums (one column) the record keeps as a factor table instead:
  /// for each row-factored value made from them, in its slot, the C factors
  /// of its rows (zero at and past n; store_row_factors), then the state's
  /// decay factor exp(G_{n-1}) in a 16-byte word of its own. The scan takes
  /// no exponential and no norm. Maps the gate sums to their values' count.
  llvm::DenseMap<mlir::Operation *, int64_t> factorTables;
  /// Stored values that are rows of an input scaled by a factor a row
  /// (RowFactors.h): the record holds nothing for them; the scan loads the
  /// input's rows and applies the factors, made from gate sums it loads, to
  /// the products that read them.
  llvm::DenseMap<mlir::Operation *, RowFactor> rowFactored;
  int64_t recordFloats = 0;
  /// The ops each kernel runs, scheduled (see scheduleOps).
  llvm::SetVector<mlir::Operation *> prepareOps, scanOps;
};

/// The floats of `gates`' factor table (StateSplit::factorTables); the
/// decay factor is at its last word.
int64_t factorTableFloats(const StateSplit &split, mlir::Operation *gates,
                          int64_t chunkRows);

/// Lays out the record of `split.stored` (less its row-factored values) and
/// the prepare kernel's ops: offset, columns, bf16, recordFloats and
/// prepareOps. splitAtState calls it; so does factorRows after changing the
/// cut.
void layOutRecord(ChunkedOp op, StateSplit &split,
                  const llvm::DenseMap<mlir::Value, TileShape> &fullShapes,
                  bool tensorCores);

/// Cuts the chunk body at the state. `fullShapes` are the shapes with one
/// value tile spanning value_dim (the prepare kernel's).
StateSplit splitAtState(ChunkedOp op,
                        const llvm::DenseMap<mlir::Value, TileShape> &fullShapes,
                        bool tensorCores);

} // namespace lina::cuda

#endif // LINA_CODEGEN_CUDA_STATESPLIT_H
