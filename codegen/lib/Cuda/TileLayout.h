//===- TileLayout.h - Shapes and shared-memory homes of tiles ---*- C++ -*-===//
//
// Part of lina. Before printing a kernel the emitter decides, for the ops a
// kernel runs: each tile's shape once value columns are split into tiles of
// tile-v, and an offset in shared memory, reusing a buffer once its last
// reader has run.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_CODEGEN_CUDA_TILELAYOUT_H
#define LINA_CODEGEN_CUDA_TILELAYOUT_H

#include "lina/Dialect/Lina/IR/Lina.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

#include <string>

namespace lina::cuda {

/// The row stride, in elements, of a shared-memory tile with `cols` columns:
/// the prelude's ld(), which says why rows are padded.
inline int64_t rowStride(int64_t cols) {
  return cols < 8 || cols % 16 == 8 ? cols : cols + 8;
}

struct TileShape {
  int64_t rows = 0, cols = 0;
  bool valueColumns = false; ///< cols are a tile-v slice of value_dim
  bool valueRows = false;    ///< rows are (a backward's transposed tiles)
  /// The tile keeps 16-bit elements (the prelude's packed tiles): half the
  /// space. Set per kernel by the emitter.
  bool packed = false;
  /// Floats the tile occupies in shared memory, row padding included.
  int64_t floats() const {
    int64_t elements = rows * rowStride(cols);
    return packed ? (elements + 1) / 2 : elements;
  }
};

/// Shapes of every value in a chunked body (or a chunked backward's) under
/// a value tile of `tileV`; the block's arguments are states (key_dim x
/// value_dim). Fails (with `error`) when a value column would be normalised
/// across tiles, or, in a forward, contracted: a forward's value columns
/// are independent. A backward's products and row sums over value columns
/// are a value tile's share of a key-side gradient, which the kernels add
/// up across tiles (BackwardKernel.h).
bool computeShapes(mlir::Block &body, int64_t tileV,
                   llvm::DenseMap<mlir::Value, TileShape> &shapes,
                   std::string &error);
inline bool computeShapes(ChunkedOp op, int64_t tileV,
                          llvm::DenseMap<mlir::Value, TileShape> &shapes,
                          std::string &error) {
  return computeShapes(op.getBody().front(), tileV, shapes, error);
}

struct TileAccess;

/// Shared-memory offsets (in floats) for the results of `ops` (in order) and
/// for the state arguments, which keep their own buffers for the whole
/// kernel.
struct SharedLayout {
  llvm::DenseMap<mlir::Value, int64_t> offset;
  int64_t totalFloats = 0;
  /// The floats below which every tile lies in shared memory: totalFloats,
  /// or where the tiles placed in global memory begin.
  int64_t sharedFloats = 0;
};
/// The operands of `loadedHere` ops are not read (their results are
/// loaded). Each op reads and writes the tiles `access` says. The results
/// of `pinned` ops get buffers of their own for the whole kernel, shared
/// with no other tile and never worked on in place: a scan's fetched tiles,
/// which the copies of the next chunk write while this chunk's ops run.
/// The values in `inGlobal` are laid out the same way in a second region
/// above all the others (from sharedFloats), a tile never worked on in
/// place across the two.
SharedLayout
allocateShared(mlir::Block &body, const llvm::SetVector<mlir::Operation *> &ops,
               const llvm::DenseMap<mlir::Value, TileShape> &shapes,
               const llvm::SetVector<mlir::Operation *> &loadedHere,
               const TileAccess &access,
               const llvm::SetVector<mlir::Operation *> &pinned = {},
               const llvm::DenseSet<mlir::Value> &inGlobal = {});

/// For a kernel whose tiles need more than `budget` floats of shared memory
/// (with `reserved` floats beside them): the values to keep in global
/// memory instead, so that the rest fit. Chosen one at a time among the
/// tiles live where the most floats are: the least touched one that alone
/// covers the excess, else the one the fewest calls read or write per float
/// (each call waits on a tile in global memory once). Empty where everything
/// fits; where nothing can make it fit, every value but the block's
/// arguments and the packed tiles (ldmatrix reads shared memory alone).
llvm::DenseSet<mlir::Value>
chooseGlobalTiles(mlir::Block &body,
                  const llvm::SetVector<mlir::Operation *> &ops,
                  const llvm::DenseMap<mlir::Value, TileShape> &shapes,
                  const TileAccess &access, int64_t budget, int64_t reserved);

/// The ops of `ops` in the order a kernel runs them: loads (and the ops in
/// `loadedHere`, whose results a kernel loads rather than computes) first,
/// then program order with every op sunk to just before its first reader.
llvm::SetVector<mlir::Operation *>
scheduleOps(mlir::Block &body, const llvm::DenseSet<mlir::Operation *> &ops,
            const llvm::SetVector<mlir::Operation *> &loadedHere = {});
inline llvm::SetVector<mlir::Operation *>
scheduleOps(ChunkedOp op, const llvm::DenseSet<mlir::Operation *> &ops,
            const llvm::SetVector<mlir::Operation *> &loadedHere = {}) {
  return scheduleOps(op.getBody().front(), ops, loadedHere);
}

/// The barrier interval of each op of `order` (a kernel's ops in the order
/// it runs them) where ops move up to `window` places earlier to join an
/// interval whose ops made none of their operands: one barrier a dependent
/// step instead of one wherever an op reads its predecessor's tile. In
/// `order`'s order within an interval (byRecordedInterval). The ops of
/// `loaded` are loaded, not computed: their operands do not count.
llvm::DenseMap<mlir::Operation *, int64_t>
groupIndependentOps(const llvm::SetVector<mlir::Operation *> &order,
                    int64_t window,
                    const llvm::SetVector<mlir::Operation *> &loaded);

/// `order` regrouped by the intervals its ops record (lina.interval,
/// lina-group-barriers'), each interval's ops in `order`'s order; `order`
/// itself where not every op records one.
llvm::SetVector<mlir::Operation *>
byRecordedInterval(const llvm::SetVector<mlir::Operation *> &order);

/// Why the intervals `order`'s ops record cannot be run (an op without one
/// among ops with one, or one before an operand's); "" where they can or
/// none records one.
std::string intervalRefusal(const llvm::SetVector<mlir::Operation *> &order,
                            const llvm::SetVector<mlir::Operation *> &loaded);

/// The ops `roots` depend on (themselves included), scheduled.
llvm::SetVector<mlir::Operation *>
backwardSlice(mlir::Block &body, llvm::ArrayRef<mlir::Operation *> roots);
inline llvm::SetVector<mlir::Operation *>
backwardSlice(ChunkedOp op, llvm::ArrayRef<mlir::Operation *> roots) {
  return backwardSlice(op.getBody().front(), roots);
}

} // namespace lina::cuda

#endif // LINA_CODEGEN_CUDA_TILELAYOUT_H
