//===- WarpgroupRoles.cpp - Each op's part in the warpgroup scan --------===//
//
// Part of lina. lina-warpgroup-roles: for each scheduled lina.chunked whose
// schedule asks for warpgroup products and whose rule the generated
// warpgroup scan prints (the additive rule with at most a scalar decay),
// records on every op of the chunk its part in that
// kernel (WarpgroupScan.h): the fetched tiles, the per-token columns, the
// row factors folded into the products, and the products themselves. The
// printer prints from the records; a chunk it cannot print is an error here,
// naming the op, before any code is printed.
//
//===----------------------------------------------------------------------===//
#include "lina/Codegen/Passes.h"

#include "WarpgroupScan.h"

#include "lina/Dialect/Lina/IR/SpecConversion.h"
#include "lina/Runtime/KernelForms.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

namespace lina {
namespace {

struct LinaWarpgroupRoles
    : public PassWrapper<LinaWarpgroupRoles, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(LinaWarpgroupRoles)

  StringRef getArgument() const final { return "lina-warpgroup-roles"; }
  StringRef getDescription() const final {
    return "Record the part each op of a fused additive chunk plays in the "
           "generated warpgroup scan (lina.warpgroup)";
  }
  void getDependentDialects(DialectRegistry &registry) const final {
    registry.insert<LinaDialect>();
  }

  void runOnOperation() final {
    auto recorded = cuda::recordOnPrintedScans(
        getOperation(), kWarpgroupAttr,
        [](ChunkedOp op, cuda::WarpgroupScan &scan) {
          for (auto [inner, role] : scan.roles)
            inner->setDiscardableAttr(
                kWarpgroupAttr,
                StringAttr::get(op.getContext(), cuda::toString(role)));
          return success();
        });
    if (failed(recorded))
      signalPassFailure();
  }
};

} // namespace

std::unique_ptr<Pass> createLinaWarpgroupRoles() {
  return std::make_unique<LinaWarpgroupRoles>();
}

} // namespace lina
