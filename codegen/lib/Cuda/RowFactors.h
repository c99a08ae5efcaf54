//===- RowFactors.h - Scaled input rows the scan rescales itself -*- C++ -*-===//
//
// Part of lina. With scalar gates, the decayed q and k of a chunk are the
// input's rows times one factor a row: q~ = c Diag(exp(G)) q and
// k~ = Diag(exp(G_last - G)) k, with the rows' inverse norms in the factor
// where q and k are l2-normalised (gdn, DeltaNet). The prepare kernel used to write them out
// (two bf16 tiles a chunk, half of mamba2's prepare traffic) for a scan that
// only multiplies them into the state. Here the prepare kernel stores the
// factors (C floats a value) and the scan loads q and k from the inputs,
// and scales the rows of the products that read them: q~ S is Diag(f) (q S), an epilogue on the accumulators;
// k~^T Z is k^T (Diag(f) Z), a scaling of Z's fragment in the update
// (StateRegisters.cuh's row factors).
//
//===----------------------------------------------------------------------===//
#ifndef LINA_CODEGEN_CUDA_ROWFACTORS_H
#define LINA_CODEGEN_CUDA_ROWFACTORS_H

#include "RegisterState.h"
#include "StateSplit.h"

#include <optional>

namespace lina::cuda {

/// `stored`'s value as c Diag(exp(G)) N (RowFactor), where it is one:
/// scales and one decay of rows with one gate column over a load of q or
/// k or its l2norm, the gate sums being a stored cumsum; nullopt
/// otherwise.
std::optional<RowFactor> rowFactorOf(mlir::Operation *stored,
                                     const StateSplit &split,
                                     const llvm::DenseMap<mlir::Value, TileShape> &shapes);

/// Where `plan` has each warp own its value columns, moves to
/// `split.rowFactored` each stored value that is a RowFactor and that the
/// scan reads only as the X of a register-state product X S or as Y of an
/// update S + Y^T Z; their gate sums are then stored as factor tables
/// (StateSplit::factorTables), and the record is laid out again.
void factorRows(ChunkedOp op, StateSplit &split, const RegisterState &plan,
                const llvm::DenseMap<mlir::Value, TileShape> &fullShapes,
                bool tensorCores);

} // namespace lina::cuda

#endif // LINA_CODEGEN_CUDA_ROWFACTORS_H
