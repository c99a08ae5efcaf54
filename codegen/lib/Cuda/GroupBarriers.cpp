//===- GroupBarriers.cpp - The gradients kernel's barrier intervals -----===//
//
// Part of lina. lina-group-barriers: a backward's gradients kernel runs its
// chunk's ops on tiles in shared memory, and the emitter puts a barrier
// before an op wherever it reads (or overwrites) what an op since the last
// barrier wrote. In the order the kernel ran them first (each op sunk to
// just before its first reader, so tiles die early) nearly every op read
// its predecessor's tile: gdn's kernel met 50 barriers a chunk on a
// dependence chain 16 ops deep. This pass moves an op up to `window` places
// earlier into an interval that made none of its operands, and records the
// interval on each op (`lina.interval`); the kernel then runs its ops
// interval by interval, and the ops of one interval overlap their
// latencies between the same two barriers. lina-pack-states and
// lina-global-tiles, after it, plan the kernel in that order, and the
// emitter refuses intervals that would read a value before it is made.
//
//===----------------------------------------------------------------------===//
#include "lina/Codegen/Passes.h"

#include "WalkingKernelChoice.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

namespace lina {
namespace {

struct LinaGroupBarriers
    : public PassWrapper<LinaGroupBarriers, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(LinaGroupBarriers)

  LinaGroupBarriers() = default;
  LinaGroupBarriers(const LinaGroupBarriers &other) : PassWrapper(other) {}
  explicit LinaGroupBarriers(int64_t places) { window = places; }

  StringRef getArgument() const final { return "lina-group-barriers"; }
  StringRef getDescription() const final {
    return "Group each lina.chunked_backward's gradients kernel's independent "
           "ops between the same barriers (lina.interval)";
  }
  void getDependentDialects(DialectRegistry &registry) const final {
    registry.insert<LinaDialect>();
  }

  Option<int64_t> window{
      *this, "window",
      llvm::cl::desc("How many places an op may move up to join an earlier "
                     "interval (0: record none)"),
      llvm::cl::init(kDefaultBarrierWindow)};

  void runOnOperation() final {
    if (window < 0) {
      getOperation().emitError()
          << "lina-group-barriers: window must not be negative (0: record "
             "none)";
      return signalPassFailure();
    }
    getOperation().walk([&](ChunkedBackwardOp op) {
      // Planned afresh from the kernel's own order: the chooser would read
      // an earlier run's record.
      op.getBody().walk(
          [](Operation *inner) { inner->removeAttr(kIntervalAttr); });
      if (window == 0)
        return;
      OpBuilder b(op);
      for (auto [inner, interval] : cuda::chooseBarrierIntervals(op, window))
        inner->setAttr(kIntervalAttr, b.getI64IntegerAttr(interval));
    });
  }
};

} // namespace

std::unique_ptr<Pass> createLinaGroupBarriers(int64_t window) {
  return std::make_unique<LinaGroupBarriers>(window);
}

} // namespace lina
