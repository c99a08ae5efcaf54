//===- WalkingKernelChoice.h - What the emitter would choose ----*- C++ -*-===//
//
// Part of lina. lina-pipeline-loads and lina-occupancy ask the emitter's
// layout what the kernel that walks a chunk's chunks can afford: the ring of
// buffers it fetches its tiles into without costing occupancy that matters
// (KernelPrinter::ringDepth), and the CTAs an SM it asks ptxas to fit.
// lina-pipeline-loads asks the ring of a backward's two scans too.
// lina-row-passes asks which
// row-wise ops the split strategy's prepare kernel chains into row passes
// (RowPass.h). lina-global-tiles asks which tiles a backward's kernels keep in
// global memory.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_CODEGEN_CUDA_WALKINGKERNELCHOICE_H
#define LINA_CODEGEN_CUDA_WALKINGKERNELCHOICE_H

#include "lina/Dialect/Lina/IR/Lina.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>

namespace lina::cuda {

struct WalkingKernelChoice {
  /// The buffers a fetched tile gets (0: the kernel fetches nothing ahead,
  /// the schedule not asking for prefetch or the buffers not fitting).
  int64_t ring = 0;
  /// The __launch_bounds__ minimum of CTAs an SM (0: none).
  int64_t minCTAs = 0;
  /// The same for the chunk-parallel kernel beside it (the split
  /// strategy's prepare kernel, the materialize strategy's output kernel).
  int64_t parallelMinCTAs = 0;
};

/// What `op`'s walking kernel gets under its schedule and the state's
/// placement, or nullopt where `op` cannot be printed (the emitter says
/// why).
std::optional<WalkingKernelChoice> chooseWalkingKernel(ChunkedOp op);

/// The row pass of each op the prepare kernel of `op`'s split schedule
/// does in one (its members and the loads it fetches into registers), by
/// the pass's index; empty where no prepare kernel runs row passes or
/// none was printed (the emitter names the problem when asked to print).
llvm::DenseMap<mlir::Operation *, int64_t> chooseRowPasses(ChunkedOp op);

/// The ops of `op` whose results its backward's kernels keep in global
/// memory, with the kernels' names (kInGlobalAttr's "scan", "chunks");
/// empty where every kernel's tiles fit in shared memory or `op` cannot be
/// printed (the emitter names the problem when asked to print).
llvm::DenseMap<mlir::Operation *, llvm::SmallVector<llvm::StringRef, 2>>
chooseBackwardGlobalTiles(ChunkedBackwardOp op);

/// What the gradients kernel of `op` can keep packed in bf16: the body
/// arguments (0: the chunk's starting state, 1: the gradient of its last
/// state; kPackedStatesAttr) of a bf16 spec that only tensor-core products
/// and row dots read, and the ops whose 16-bit tiles it loads (inputs, dL/do
/// and values the record holds in bf16; kPackedAttr) that only tensor-core
/// products read. Empty where none or `op` cannot be printed.
struct PackedTiles {
  llvm::SmallVector<int64_t, 2> states;
  llvm::SmallVector<mlir::Operation *> loads;
};
PackedTiles choosePackedTiles(ChunkedBackwardOp op);

/// The rings of buffers (as WalkingKernelChoice's `ring`) the backward's
/// two scans fetch their tiles into: the states scan, printed from the
/// module's lina.chunked, and the reverse scan, from `op`. A scan gets none
/// where its rings do not fit in shared memory beside its tiles, or it
/// cannot be printed (the emitter names the problem when asked to print).
struct BackwardScanRings {
  int64_t states = 0, stateGrads = 0;
};
BackwardScanRings chooseBackwardScanRings(ChunkedBackwardOp op);

/// The barrier interval of each op of `op`'s gradients kernel
/// (kIntervalAttr) with ops moving up to `window` places
/// (groupIndependentOps), planned from the kernel's order without records;
/// empty where `op` cannot be printed.
llvm::DenseMap<mlir::Operation *, int64_t>
chooseBarrierIntervals(ChunkedBackwardOp op, int64_t window);

} // namespace lina::cuda

#endif // LINA_CODEGEN_CUDA_WALKINGKERNELCHOICE_H
