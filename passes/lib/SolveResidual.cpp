//===- SolveResidual.cpp - One solve of a delta chunk's residual --------===//
//
// Part of lina. lina-solve-residual: a delta chunk writes its new values U
// as the solve of its values minus the solve of its keys times the state,
// U = T X - (T Y) S with T = (I + A)^-1. A kernel that walks the chunks on
// warpgroup products keeps the state in registers and has T prepared per
// chunk by a chunk-parallel kernel, so it wants the other order: Y S and
// the residual X - Y S where the state is, then one product with T. The
// rewrite is linearity; it changes no value beyond rounding.
//
//===----------------------------------------------------------------------===//
#include "lina/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

using namespace mlir;

namespace lina {
#define GEN_PASS_DEF_LINASOLVERESIDUAL
#include "lina/Transforms/Passes.h.inc"

namespace {

/// Rewrites `sub` = tri_solve(A, X) - matmul(tri_solve(A, Y), S), with S
/// the chunk's state and each intermediate read by the next alone, as
/// tri_solve(A, X - matmul(Y, S)); false where `sub` is not that.
bool solveResidual(SubOp sub, Value state) {
  auto solvedX = sub.getLhs().getDefiningOp<TriSolveOp>();
  auto product = sub.getRhs().getDefiningOp<MatmulOp>();
  if (!solvedX || !product || product.getTransposeLhs() ||
      product.getRhs() != state)
    return false;
  auto solvedY = product.getLhs().getDefiningOp<TriSolveOp>();
  if (!solvedY || solvedY.getLower() != solvedX.getLower() ||
      !solvedX->hasOneUse() || !solvedY->hasOneUse() || !product->hasOneUse())
    return false;
  OpBuilder b(sub);
  Location loc = sub.getLoc();
  Value statePart =
      b.create<MatmulOp>(loc, product.getType(), solvedY.getRhs(), state,
                         /*transpose_lhs=*/false)
          .getResult();
  Value residual =
      b.create<SubOp>(loc, solvedX.getRhs(), statePart).getResult();
  Value solved =
      b.create<TriSolveOp>(loc, solvedX.getLower(), residual).getResult();
  sub.getResult().replaceAllUsesWith(solved);
  sub.erase();
  product.erase();
  solvedX.erase();
  solvedY.erase();
  return true;
}

struct LinaSolveResidualPass
    : public impl::LinaSolveResidualBase<LinaSolveResidualPass> {
  void runOnOperation() override {
    getOperation().walk([](ChunkedOp op) {
      std::optional<ScheduleAttr> schedule = op.getSchedule();
      if (!schedule || !schedule->getWgmma())
        return;
      Block &body = op.getBody().front();
      if (body.getNumArguments() != 1)
        return;
      SmallVector<SubOp> subs(body.getOps<SubOp>());
      for (SubOp sub : subs)
        solveResidual(sub, body.getArgument(0));
    });
  }
};

} // namespace

} // namespace lina
