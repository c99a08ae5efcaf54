//===- WarpgroupRecord.cpp - What a delta chunk's record carries --------===//
//
// Part of lina. lina-warpgroup-record: for each chunk whose ops carry
// lina-warpgroup-roles' records and whose rule runs a prepare kernel before
// its scan (the delta rule), which values the prepare kernel computes into
// the chunk's record for the scan to read, each in a 64-float slot after T
// (`lina.wg_record`). The prepare kernel already has the per-token columns
// (gates, their running sums, betas) and k's rows' norms at hand for A; a
// value the scan reads from the landed record is one it no longer loads,
// sums or normalises on its chain, where every step of a chunk waits on
// the one before (WarpgroupScan.h, planWarpgroupRecord).
//
//===----------------------------------------------------------------------===//
#include "lina/Codegen/Passes.h"

#include "WarpgroupScan.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

namespace lina {
namespace {

struct LinaWarpgroupRecord
    : public PassWrapper<LinaWarpgroupRecord, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(LinaWarpgroupRecord)

  StringRef getArgument() const final { return "lina-warpgroup-record"; }
  StringRef getDescription() const final {
    return "Record the values a delta chunk's prepare kernel computes into "
           "its record for the generated warpgroup scan (lina.wg_record)";
  }
  void getDependentDialects(DialectRegistry &registry) const final {
    registry.insert<LinaDialect>();
  }

  void runOnOperation() final {
    if (failed(cuda::recordFromRoles(getOperation(), kWarpgroupRecordAttr,
                                     cuda::planWarpgroupRecord)))
      signalPassFailure();
  }
};

} // namespace

std::unique_ptr<Pass> createLinaWarpgroupRecord() {
  return std::make_unique<LinaWarpgroupRecord>();
}

} // namespace lina
