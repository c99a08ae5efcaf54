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
#include <string>

namespace lina {

/// With the state in registers (the op's #lina.placement, `state =
/// registers`), the part each op of the walking kernel plays in using them,
/// a discardable attribute on the ops that play one
/// (codegen/lib/Cuda/RegisterState.h's stateUse lists the values).
inline constexpr llvm::StringLiteral kStateUseAttr = "lina.state_use";

/// The row pass (its index, from 0) that the split strategy's prepare
/// kernel does an op in: a chain of row-wise ops run in registers, a warp a
/// row, with the input rows it reads fetched into registers (Prelude.cuh's
/// "Row passes"). A discardable i64 attribute on the pass's members and
/// fetched loads, which lina-row-passes sets.
inline constexpr llvm::StringLiteral kRowPassAttr = "lina.row_pass";
/// The kernels of a lina.chunked_backward that keep the op's result in
/// global memory rather than shared memory: a discardable array of names,
/// "scan" (the reverse scan of the state's gradient) and "chunks" (the
/// chunk-parallel gradients kernel), which lina-global-tiles sets where a
/// kernel's tiles need more shared memory than a CTA has.
inline constexpr llvm::StringLiteral kInGlobalAttr = "lina.in_global";
/// The body arguments of a lina.chunked_backward (0: the chunk's starting
/// state, 1: the gradient of its last state) that the chunk-parallel
/// gradients kernel keeps packed in shared memory, bf16 as the workspace
/// holds them: a discardable i64 array on the op, which lina-pack-states
/// sets.
inline constexpr llvm::StringLiteral kPackedStatesAttr = "lina.packed_states";
/// An op of a lina.chunked_backward whose 16-bit tile the chunk-parallel
/// gradients kernel loads (an input, dL/do, a value the record holds in
/// bf16) and keeps packed in shared memory, as loaded: a discardable unit
/// attribute, which lina-pack-states sets where only tensor-core products
/// read the tile there.
inline constexpr llvm::StringLiteral kPackedAttr = "lina.packed";
/// The barrier interval an op of a lina.chunked_backward's gradients kernel
/// runs in: the kernel runs its ops by interval (in its own order within
/// one), so that ops that read nothing of each other's share the barriers
/// between them. A discardable i64 that lina-group-barriers sets.
inline constexpr llvm::StringLiteral kIntervalAttr = "lina.interval";
/// The part an op plays in the generated warpgroup scan of a fused
/// additive chunk on sm_90a (codegen/lib/Cuda/WarpgroupScan.h lists the
/// parts): a discardable string attribute that lina-warpgroup-roles sets
/// on every op of such a chunk, and the printer prints from.
inline constexpr llvm::StringLiteral kWarpgroupAttr = "lina.warpgroup";
/// A product's commit group in the generated warpgroup scan: its place in
/// the order a chunk issues its warpgroup products (0 first), from which
/// the printer counts each wait. A discardable i64 that
/// lina-warpgroup-groups sets on the scan's products.
inline constexpr llvm::StringLiteral kWarpgroupGroupAttr = "lina.wg_group";
/// A value the delta rule's prepare kernel computes into each chunk's
/// record for the generated warpgroup scan to read (a per-token column, or
/// the norms of k's rows): its 64-float slot after T, 0 first. A
/// discardable i64 that lina-warpgroup-record sets.
inline constexpr llvm::StringLiteral kWarpgroupRecordAttr = "lina.wg_record";
/// The op's placement (#lina.placement), or the default one (the state in
/// shared memory, nothing fetched ahead) where no pass has placed it.
inline PlacementAttr placementOf(ChunkedOp op) {
  if (PlacementAttr placement = op.getPlacementAttr())
    return placement;
  return PlacementAttr::get(op.getContext(), ir::StateHome::shared, 0, 0, 0);
}

/// Records `op`'s placement; the default one (shared, no ring, no minimum
/// of CTAs) is no attribute at all, as before any pass placed the op.
inline void setPlacement(ChunkedOp op, ir::StateHome state, int64_t ring,
                         int64_t minCtas, int64_t parallelMinCtas) {
  if (state == ir::StateHome::shared && ring == 0 && minCtas == 0 &&
      parallelMinCtas == 0)
    op.removePlacementAttr();
  else
    op.setPlacementAttr(PlacementAttr::get(op.getContext(), state, ring,
                                           minCtas, parallelMinCtas));
}

/// Whether lina-place-state put `op`'s state in registers: the kernel that
/// walks the chunks keeps it as the tensor cores' fp32 accumulators of S^T,
/// spread over its warps (codegen/lib/Cuda/RegisterState.h says when that
/// holds), not as a shared-memory tile.
inline bool stateInRegisters(ChunkedOp op) {
  return placementOf(op).getState() == ir::StateHome::registers;
}

/// A backward's placement, for its reverse scan: its `state` and `ring`
/// apply (the CTAs an SM are the emitter's), the default where no pass has
/// placed it.
inline PlacementAttr placementOf(ChunkedBackwardOp op) {
  if (PlacementAttr placement = op.getPlacementAttr())
    return placement;
  return PlacementAttr::get(op.getContext(), ir::StateHome::shared, 0, 0, 0);
}

/// Records it; the default is no attribute, as for a lina.chunked.
inline void setPlacement(ChunkedBackwardOp op, ir::StateHome state,
                         int64_t ring) {
  if (state == ir::StateHome::shared && ring == 0)
    op.removePlacementAttr();
  else
    op.setPlacementAttr(PlacementAttr::get(op.getContext(), state, ring, 0, 0));
}

/// The same for a backward: whether its reverse scan keeps the state's
/// gradient in registers.
inline bool stateInRegisters(ChunkedBackwardOp op) {
  return placementOf(op).getState() == ir::StateHome::registers;
}

/// The buffers lina-pipeline-loads gave each tile the kernel that walks
/// the chunks fetches ahead (1 to 3: 1 fetches the next chunk through
/// registers, 2 and 3 copy one and two chunks ahead straight into shared
/// memory); 0 where each chunk loads its tiles when it reaches them.
inline int64_t fetchRingOf(ChunkedOp op) { return placementOf(op).getRing(); }
/// The same for a backward's reverse scan.
inline int64_t fetchRingOf(ChunkedBackwardOp op) {
  return placementOf(op).getRing();
}

/// lina-place-state: for each scheduled lina.chunked whose kernel walks
/// the chunks (fused, or the split strategy's scan), decides whether that
/// kernel keeps the state in registers (#lina.placement's `state`) and how
/// its ops use them (kStateUseAttr).
std::unique_ptr<mlir::Pass> createLinaPlaceState();

/// lina-occupancy: for each lina.chunked, the CTAs an SM the kernel that
/// walks the chunks asks ptxas to fit (#lina.placement's `min_ctas`). Runs
/// after lina-pipeline-loads, whose ring sets the kernel's shared memory.
std::unique_ptr<mlir::Pass> createLinaOccupancy();

/// lina-pipeline-loads: for each lina.chunked whose schedule asks for
/// `prefetch`, the ring of buffers the kernel that walks the chunks fetches
/// its tiles into (#lina.placement's `ring`); in a backward's module, the
/// rings of the backward's two scans (the lina.chunked's for the states
/// scan, the lina.chunked_backward's for the reverse scan). Runs after
/// lina-place-state, whose record changes what the kernel keeps in shared
/// memory.
std::unique_ptr<mlir::Pass> createLinaPipelineLoads();

/// lina-row-passes: for each lina.chunked whose schedule splits it into a
/// prepare kernel and a scan, which row-wise ops the prepare kernel chains
/// into row passes (kRowPassAttr); removes the records elsewhere.
std::unique_ptr<mlir::Pass> createLinaRowPasses();

/// lina-global-tiles: for each scheduled lina.chunked_backward, which
/// tiles its kernels keep in global memory where a chunk's tiles need more
/// shared memory than a CTA has (kInGlobalAttr on their ops): the least
/// touched, so that the rest fit (codegen/lib/Cuda/TileLayout.h,
/// chooseGlobalTiles). Removes the records elsewhere.
std::unique_ptr<mlir::Pass> createLinaGlobalTiles();

/// lina-warpgroup-roles: for each scheduled lina.chunked whose schedule
/// asks for warpgroup products (`mma = warpgroup`) and whose rule the generated
/// warpgroup scan prints (additive, at most a scalar decay), the part each
/// op plays in it (kWarpgroupAttr); a chunk that is not such a scan is an
/// error naming the op. Removes the records elsewhere.
std::unique_ptr<mlir::Pass> createLinaWarpgroupRoles();

/// lina-warpgroup-groups: for each chunk lina-warpgroup-roles recorded,
/// the order its scan issues the warpgroup products in, as each product's
/// commit group (kWarpgroupGroupAttr): the products a chunk issues at its
/// top with the landed tiles go longest chain to the state's update first.
/// Removes the records elsewhere.
std::unique_ptr<mlir::Pass> createLinaWarpgroupGroups();

/// lina-warpgroup-record: for each chunk lina-warpgroup-roles recorded
/// whose rule has a prepare kernel (the delta rule), the values that kernel
/// computes into the chunk's record for the scan (kWarpgroupRecordAttr):
/// the per-token columns the scan reads and the norms of k's rows. Removes
/// the records elsewhere.
std::unique_ptr<mlir::Pass> createLinaWarpgroupRecord();

/// lina-pack-states: for each scheduled lina.chunked_backward of a 16-bit
/// spec, which of the chunk's two states the gradients kernel keeps packed
/// (kPackedStatesAttr; bf16 specs): each that only tensor-core products and
/// row dots read; and which of the 16-bit tiles it loads it keeps packed
/// (kPackedAttr on their ops): each that only tensor-core products read.
/// Runs before lina-global-tiles, whose layout counts them so and keeps
/// them in shared memory.
std::unique_ptr<mlir::Pass> createLinaPackStates();

/// How far lina-group-barriers moves an op up the gradients kernel's order
/// to join an earlier barrier interval, by default.
inline constexpr int64_t kDefaultBarrierWindow = 16;
/// lina-group-barriers: for each scheduled lina.chunked_backward, the
/// barrier interval of each op its gradients kernel runs (kIntervalAttr),
/// an op moving up to `window` places earlier to join an interval that
/// made none of its operands (cuda::groupIndependentOps); 0 records none.
/// Runs before lina-pack-states and lina-global-tiles, which plan the
/// kernel in that order.
std::unique_ptr<mlir::Pass>
createLinaGroupBarriers(int64_t window = kDefaultBarrierWindow);
/// The call lina-choose-schedule chooses for; 0 or "" where unknown.
struct ChooseScheduleOptions {
  std::string arch;      ///< e.g. "sm_90"
  int64_t smCount = 0;   ///< the GPU's multiprocessors
  int64_t sequences = 0; ///< sequences in the call
  int64_t seqLen = 0;    ///< tokens a sequence (the longest's, packed)
  /// Choose the backward's layout instead (chunk size, tile-v, warps of
  /// its kernels; the call's shape is not used).
  bool backward = false;
};
/// lina-choose-schedule: for each lina.recurrence (after lina-specialize),
/// the schedule a call gets when nothing was tuned for it, recorded as the
/// op's `chunk_size` and `schedule` (ChooseSchedule.cpp says what it picks
/// and why). defaultSchedule runs it, and defaultBackwardSchedule with
/// `backward`.
std::unique_ptr<mlir::Pass>
createLinaChooseSchedule(const ChooseScheduleOptions &call = {});
/// Registers the passes above with the pass registry (lina-opt).
void registerLinaCodegenPasses();

} // namespace lina

#endif // LINA_CODEGEN_PASSES_H
