//===- WarpgroupGroups.cpp - The order a warpgroup scan issues products -===//
//
// Part of lina. lina-warpgroup-groups: for each chunk whose ops carry
// lina-warpgroup-roles' records, the order its scan kernel issues the
// warpgroup products in, as each product's commit group
// (`lina.wg_group`). wgmma's commit groups land in the order they were
// issued, so a product waited for first must be issued first; the printer
// counts every wait from these records. Which of the products a chunk
// issues at its top goes first is the decision: the one whose result the
// most later products read (the delta rule's residual product, whose
// residual is solved for the values that the intra-chunk product and the
// update read), so that the chain to the next chunk starts as soon as its
// product lands (WarpgroupScan.h, orderWarpgroupGroups).
//
//===----------------------------------------------------------------------===//
#include "lina/Codegen/Passes.h"

#include "WarpgroupScan.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

namespace lina {
namespace {

struct LinaWarpgroupGroups
    : public PassWrapper<LinaWarpgroupGroups, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(LinaWarpgroupGroups)

  StringRef getArgument() const final { return "lina-warpgroup-groups"; }
  StringRef getDescription() const final {
    return "Record the order a generated warpgroup scan issues its products "
           "in, as each product's commit group (lina.wg_group)";
  }
  void getDependentDialects(DialectRegistry &registry) const final {
    registry.insert<LinaDialect>();
  }

  void runOnOperation() final {
    // The order of what lina-warpgroup-roles recorded.
    if (failed(cuda::recordFromRoles(getOperation(), kWarpgroupGroupAttr,
                                     cuda::orderWarpgroupGroups)))
      signalPassFailure();
  }
};

} // namespace

std::unique_ptr<Pass> createLinaWarpgroupGroups() {
  return std::make_unique<LinaWarpgroupGroups>();
}

} // namespace lina
