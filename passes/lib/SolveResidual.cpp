//===- SolveResidual.cpp - One solve of a delta chunk's residual --------===//
//
// Part of lina. lina-solve-residual: a delta chunk writes its new values U
// as the solve of its values minus the solve of its keys times the state,
// U = T X - (T Y) S with T = (I + A)^-1. A kernel that walks the chunks on
// warpgroup products keeps the state in registers and has T prepared per
// chunk by a chunk-parallel kernel, so it wants the other order: Y S and
// the residual X - Y S where the state is, then one product with T. The
// rewrite is linearity; it changes no value beyond rounding. A DPLR
// chunk's values are a sum, U = (T Y) S + T X (Y the decayed a, X = L V its
// low-rank scores times v), and become tri_solve(A, Y S + X) the same way.
//
//===----------------------------------------------------------------------===//
#include "lina/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

using namespace mlir;

namespace lina {
#define GEN_PASS_DEF_LINASOLVERESIDUAL
#include "lina/Transforms/Passes.h.inc"

namespace {

/// The solve of the state's term, tri_solve(A, Y) S with S the chunk's
/// state, each read by the next alone; null where `v` is not that.
MatmulOp solvedStateTerm(Value v, Value state) {
  auto product = v.getDefiningOp<MatmulOp>();
  if (!product || product.getTransposeLhs() || product.getRhs() != state ||
      !product->hasOneUse())
    return {};
  auto solved = product.getLhs().getDefiningOp<TriSolveOp>();
  return solved && solved->hasOneUse() ? product : MatmulOp();
}

/// Rewrites `combined`, the values tri_solve(A, X) - tri_solve(A, Y) S (a
/// sub) or either order of tri_solve(A, Y) S + tri_solve(A, X) (an add),
/// as one solve of the residual, tri_solve(A, X - Y S) or
/// tri_solve(A, Y S + X); false where `combined` is neither.
bool solveResidual(Operation *combined, Value state) {
  Value lhs = combined->getOperand(0), rhs = combined->getOperand(1);
  const bool sum = isa<AddOp>(combined);
  MatmulOp product = solvedStateTerm(rhs, state);
  Value other = lhs;
  if (!product && sum) {
    product = solvedStateTerm(lhs, state);
    other = rhs;
  }
  auto solvedX = other.getDefiningOp<TriSolveOp>();
  if (!product || !solvedX || !solvedX->hasOneUse())
    return false;
  auto solvedY = product.getLhs().getDefiningOp<TriSolveOp>();
  if (solvedY.getLower() != solvedX.getLower())
    return false;
  OpBuilder b(combined);
  Location loc = combined->getLoc();
  Value statePart =
      b.create<MatmulOp>(loc, product.getType(), solvedY.getRhs(), state,
                         /*transpose_lhs=*/false)
          .getResult();
  Value residual =
      sum ? b.create<AddOp>(loc, statePart, solvedX.getRhs()).getResult()
          : b.create<SubOp>(loc, solvedX.getRhs(), statePart).getResult();
  Value solved =
      b.create<TriSolveOp>(loc, solvedX.getLower(), residual).getResult();
  combined->getResult(0).replaceAllUsesWith(solved);
  combined->erase();
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
      if (!schedule || schedule->getMma() != ir::Mma::warpgroup)
        return;
      Block &body = op.getBody().front();
      if (body.getNumArguments() != 1)
        return;
      SmallVector<Operation *> combined;
      for (Operation &inner : body)
        if (isa<SubOp, AddOp>(inner))
          combined.push_back(&inner);
      for (Operation *values : combined)
        solveResidual(values, body.getArgument(0));
    });
  }
};

} // namespace

} // namespace lina
