//===- Schedule.cpp - Map a chunked program onto CTAs ------------------===//
//
// Part of lina. Records the schedule on each lina.chunked (and the layout of
// each lina.chunked_backward) as its #lina.schedule, after checking it fits
// the tensor-core tile shapes; the CUDA emitter reads it back.
//
//===----------------------------------------------------------------------===//
#include "lina/Transforms/Passes.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "lina-schedule"

using namespace mlir;

namespace lina {
#define GEN_PASS_DEF_LINASCHEDULE
#include "lina/Transforms/Passes.h.inc"

namespace {

/// Segments.cuh's kMaxSegments: the combine kernel keeps one decay per
/// segment in shared memory.
constexpr int64_t kMaxSegments = 16;

/// Removes what the passes after lina-schedule recorded on `op` and its
/// body (the placement; `lina.cut`, `lina.state_use`: every `lina.*`
/// attribute the dialect verifies is one): they were decided for the
/// schedule being replaced, and a record the new one rules out (registers
/// after `shared_state`) must not reach the emitter.
void dropRecords(ChunkedOp op) {
  op.removePlacementAttr();
  op->walk([](Operation *inner) {
    SmallVector<StringAttr> records;
    for (NamedAttribute attr : inner->getDiscardableAttrs())
      if (attr.getName().getValue().starts_with("lina."))
        records.push_back(attr.getName());
    for (StringAttr name : records)
      inner->removeDiscardableAttr(name);
  });
}

struct LinaSchedulePass : public impl::LinaScheduleBase<LinaSchedulePass> {
  using LinaScheduleBase::LinaScheduleBase;

  void runOnOperation() override {
    getOperation().walk([&](ChunkedOp op) {
      if (failed(schedule(op)))
        signalPassFailure();
    });
    getOperation().walk([&](ChunkedBackwardOp op) {
      if (failed(scheduleBackward(op)))
        signalPassFailure();
    });
  }

  /// The checks a tile layout of `spec` and chunk size `c` must pass, of
  /// `tv` value columns a CTA on `w` warps.
  LogicalResult checkLayout(Operation *op, SpecAttr spec, int64_t c,
                            int64_t tv, int64_t w) {
    int64_t v = spec.getValueDim(), k = spec.getKeyDim();
    if (tv < 8 || tv % 8 != 0 || v % tv != 0)
      return op->emitError() << "lina-schedule: tile-v (" << tv
                             << ") must be a multiple of 8 dividing value_dim ("
                             << v << ")";
    if (k % 16 != 0)
      return op->emitError() << "lina-schedule: key_dim (" << k
                             << ") must be a multiple of 16 for tensor-core "
                                "tiles; 64 and 128 are the common sizes";
    if (c < 16)
      return op->emitError() << "lina-schedule: chunk size " << c
                             << " is below the 16-row tensor-core tile";
    if (w != 1 && w != 2 && w != 4 && w != 8 && w != 16)
      return op->emitError() << "lina-schedule: warps must be 1, 2, 4, 8 or "
                                "16, got "
                             << w;
    return success();
  }

  /// A backward walks its chunks like a fused scan: a CTA per (sequence,
  /// value head, value tile) of `warps` warps.
  LogicalResult scheduleBackward(ChunkedBackwardOp op) {
    if (ScheduleAttr kept = op.getScheduleAttr(); kept && !givenOptions())
      return checkLayout(op, op.getSpec(), op.getChunkSize(),
                         kept.getTileV(), kept.getWarps());
    if (failed(
            checkLayout(op, op.getSpec(), op.getChunkSize(), tileV, warps)))
      return failure();
    op.setScheduleAttr(ScheduleAttr::get(op.getContext(), tileV, warps,
                                         ir::Strategy::fused, false, false,
                                         false, false, 1, ir::Mma::warp));
    return success();
  }

  /// Whether this pass was given any option: without one, a schedule the
  /// op carries (lina-choose-schedule's, through lina-chunk) stays.
  bool givenOptions() const {
    return tileV.hasValue() || warps.hasValue() || strategy.hasValue() ||
           prefetch.hasValue() || sharedState.hasValue() ||
           directDecay.hasValue() || twoCTAs.hasValue() ||
           segments.hasValue() || mma.hasValue();
  }

  LogicalResult schedule(ChunkedOp op) {
    if (ScheduleAttr kept = op.getScheduleAttr(); kept && !givenOptions()) {
      // Checked as a schedule of the options would be: a hand-written
      // record meets the tensor-core tiles too.
      if (failed(checkLayout(op, op.getSpec(), op.getChunkSize(),
                             kept.getTileV(), kept.getWarps())))
        return failure();
      LLVM_DEBUG(llvm::dbgs() << "kept @" << op.getSymName()
                              << "'s chosen schedule\n");
      return success();
    }
    int64_t tv = tileV, w = warps;
    if (strategy != "fused" && strategy != "materialize" &&
        strategy != "split")
      return op.emitError() << "lina-schedule: strategy must be fused, "
                               "materialize or split, got '"
                            << strategy << "'";
    if (failed(checkLayout(op, op.getSpec(), op.getChunkSize(), tileV,
                           warps)))
      return failure();
    if (segments < 1 || segments > kMaxSegments)
      return op.emitError() << "lina-schedule: segments must be 1 to "
                            << kMaxSegments << ", got "
                            << static_cast<int64_t>(segments);
    if (mma != "warp" && mma != "warpgroup")
      return op.emitError() << "lina-schedule: mma must be warp or "
                               "warpgroup, got '"
                            << mma << "'";
    const bool warpgroup = mma == "warpgroup";
    // (The warpgroup scan keeps its one layout, fused, and stores what the
    // segment kernels read itself.)
    if (segments > 1 && strategy != "split" && !warpgroup)
      return op.emitError() << "lina-schedule: segments need the split "
                               "strategy or the warpgroup scan (got "
                            << strategy << ")";
    op.setScheduleAttr(ScheduleAttr::get(
        op.getContext(), tv, w, *ir::symbolizeStrategy(strategy.getValue()),
        prefetch, sharedState, directDecay, twoCTAs, segments,
        warpgroup ? ir::Mma::warpgroup : ir::Mma::warp));
    dropRecords(op);
    LLVM_DEBUG(llvm::dbgs() << "scheduled @" << op.getSymName() << ": tile-v "
                            << tv << ", warps " << w << ", " << strategy
                            << "\n");
    return success();
  }
};

} // namespace
} // namespace lina
