//===- ChunkBackward.cpp - The backward of a chunkwise algorithm -------===//
//
// Part of lina. For each lina.chunked, adds a lina.chunked_backward that
// computes the chunk's gradients by reverse-mode differentiation of its
// body: the forward's tile ops are recomputed from the chunk's inputs and
// the state before it, then each op's adjoint is emitted in reverse order,
// so a value's gradient is complete when its definition is reached. What
// the spec adds to the forward (gates, beta, the UT transform, low-rank
// terms) is differentiated the same way, so every spec gets its backward.
//
// Seeds: dL/do (lina.load_output_grad) for the stored output and the body's
// second argument for the yielded state. Results: lina.accumulate for each
// load's gradient (and a computed gate's parameters), and the yield of the
// state's gradient before the chunk. Values that depend on no input (the
// zero gates of a form without decay) get no adjoint.
//
//===----------------------------------------------------------------------===//
#include "lina/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "lina-chunk-backward"

using namespace mlir;

namespace lina {
#define GEN_PASS_DEF_LINACHUNKBACKWARD
#include "lina/Transforms/Passes.h.inc"

namespace {

/// Emits the adjoints of one chunked body into the backward body.
class AdjointBuilder {
public:
  AdjointBuilder(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  /// Differentiates `forward`'s body into the current insertion block, whose
  /// arguments are (S0, dS after the chunk); returns dS before the chunk, or
  /// null after an error on an op it cannot differentiate.
  Value build(ChunkedOp forward, Value s0, Value stateGrad);

private:
  TileType typeOf(Value v) { return cast<TileType>(v.getType()); }
  TileType tile(int64_t rows, int64_t cols) {
    return TileType::get(b.getContext(), rows, cols);
  }

  /// grad(v) += contribution, for an active v.
  void addGrad(Value v, Value contribution);
  /// `x` summed to `cols` columns: a scalar gate's gradient is the sum over
  /// the channels it scales.
  Value reduceTo(Value x, int64_t cols);
  /// The lina.cumsum (inclusive) that computes `gates`, or null.
  CumsumOp inclusiveCumsum(Value gates);
  /// A tile of zeros whose last valid row is `row`.
  Value lastRow(Value row, TileType type);
  Value matmul(Value lhs, Value rhs, bool transposeLhs = false);
  Value transpose(Value x);

  /// Emits op's adjoint given dy, its result's gradient; fails for an op
  /// with no adjoint rule, so no gradient is ever silently dropped.
  LogicalResult adjoint(Operation &op, Value dy);

  OpBuilder &b;
  Location loc;
  llvm::DenseMap<Value, Value> grads;
  llvm::DenseSet<Value> active;
};

void AdjointBuilder::addGrad(Value v, Value contribution) {
  if (!active.contains(v))
    return;
  auto [it, inserted] = grads.try_emplace(v, contribution);
  if (!inserted)
    it->second = b.create<AddOp>(loc, it->second, contribution);
}

Value AdjointBuilder::reduceTo(Value x, int64_t cols) {
  TileType t = typeOf(x);
  if (t.getCols() == cols)
    return x;
  return b.create<RowSumOp>(loc, tile(t.getRows(), 1), x);
}

CumsumOp AdjointBuilder::inclusiveCumsum(Value gates) {
  auto sums = gates.getDefiningOp<CumsumOp>();
  return sums && !sums.getExclusive() ? sums : CumsumOp();
}

Value AdjointBuilder::lastRow(Value row, TileType type) {
  Value zeros = b.create<ZerosOp>(loc, type);
  return b.create<AddToLastRowOp>(loc, type, zeros, row);
}

Value AdjointBuilder::matmul(Value lhs, Value rhs, bool transposeLhs) {
  TileType l = typeOf(lhs);
  int64_t m = transposeLhs ? l.getCols() : l.getRows();
  return b.create<MatmulOp>(loc, tile(m, typeOf(rhs).getCols()), lhs, rhs,
                            transposeLhs);
}

Value AdjointBuilder::transpose(Value x) {
  TileType t = typeOf(x);
  return b.create<TransposeOp>(loc, tile(t.getCols(), t.getRows()), x);
}

LogicalResult AdjointBuilder::adjoint(Operation &op, Value dy) {
  if (auto load = dyn_cast<LoadOp>(op)) {
    auto operand = ir::symbolizeGradient(ir::stringifyOperand(load.getOperand()));
    b.create<AccumulateOp>(loc, *operand, dy);
  } else if (auto norm = dyn_cast<L2NormOp>(op)) {
    addGrad(norm.getInput(), b.create<L2NormGradOp>(loc, dy.getType(),
                                                    norm.getInput(), dy));
  } else if (auto scale = dyn_cast<ScaleOp>(op)) {
    addGrad(scale.getInput(), b.create<ScaleOp>(loc, dy, scale.getFactor()));
  } else if (auto neg = dyn_cast<NegOp>(op)) {
    addGrad(neg.getInput(), b.create<NegOp>(loc, dy));
  } else if (auto gate = dyn_cast<GateOp>(op)) {
    auto grad = [&](ir::GateGradWrt wrt) -> Value {
      return b.create<GateGradOp>(loc, dy.getType(), wrt, gate.getSource(),
                                  gate.getInput(), dy,
                                  gate.getLowerBoundAttr());
    };
    addGrad(gate.getInput(), grad(ir::GateGradWrt::input));
    b.create<AccumulateOp>(loc, ir::Gradient::gate_a_log,
                           grad(ir::GateGradWrt::a_log));
    b.create<AccumulateOp>(loc, ir::Gradient::gate_dt_bias,
                           grad(ir::GateGradWrt::dt_bias));
  } else if (auto beta = dyn_cast<BetaOp>(op)) {
    addGrad(beta.getInput(),
            b.create<BetaGradOp>(loc, dy.getType(), beta.getSource(),
                                 beta.getInput(), dy));
  } else if (auto cumsum = dyn_cast<CumsumOp>(op)) {
    addGrad(cumsum.getInput(),
            b.create<ReverseCumsumOp>(loc, dy, cumsum.getExclusive()));
  } else if (auto add = dyn_cast<AddOp>(op)) {
    addGrad(add.getLhs(), dy);
    addGrad(add.getRhs(), dy);
  } else if (auto sub = dyn_cast<SubOp>(op)) {
    addGrad(sub.getLhs(), dy);
    addGrad(sub.getRhs(), b.create<NegOp>(loc, dy));
  } else if (auto scaleRows = dyn_cast<ScaleRowsOp>(op)) {
    Value x = scaleRows.getInput(), w = scaleRows.getWeights();
    addGrad(x, b.create<ScaleRowsOp>(loc, dy.getType(), dy, w));
    if (active.contains(w))
      addGrad(w, reduceTo(b.create<MulOp>(loc, dy, x), 1));
  } else if (auto decay = dyn_cast<DecayRowsOp>(op)) {
    Value gates = decay.getLogGates();
    addGrad(decay.getInput(),
            b.create<DecayRowsOp>(loc, dy.getType(), dy, gates,
                                  decay.getToEnd()));
    if (active.contains(gates)) {
      // d y_i / d G_i = y_i; with to_end, -y_i, and G_last collects them.
      Value z = reduceTo(b.create<MulOp>(loc, dy, decay.getResult()),
                         typeOf(gates).getCols());
      if (!decay.getToEnd()) {
        addGrad(gates, z);
      } else if (CumsumOp sums = inclusiveCumsum(gates)) {
        // exp(G_last - G_i) holds g_t for i < t: its gradient of g is the
        // exclusive cumulative sum of z, summed as such. (As -z at G_i and
        // their sum at G_last, lina.cumsum's adjoint would subtract the
        // late rows' large terms from their total to leave the early ones.)
        addGrad(sums.getInput(),
                b.create<CumsumOp>(loc, z, /*exclusive=*/true));
      } else {
        TileType row = tile(1, typeOf(z).getCols());
        addGrad(gates, b.create<NegOp>(loc, z));
        addGrad(gates, lastRow(b.create<ColSumOp>(loc, row, z),
                               typeOf(gates)));
      }
    }
  } else if (auto decay = dyn_cast<DecayStateOp>(op)) {
    Value gates = decay.getLogGates();
    addGrad(decay.getState(), b.create<DecayStateOp>(loc, dy.getType(), dy,
                                                     gates));
    if (active.contains(gates)) {
      // Row r of the state scales by exp(G_last,r): its gradient is the sum
      // over the row of dS' . S'.
      TileType state = typeOf(dy);
      Value rows = b.create<RowSumOp>(
          loc, tile(state.getRows(), 1),
          b.create<MulOp>(loc, dy, decay.getResult()));
      Value row = typeOf(gates).getCols() == 1
                      ? Value(b.create<ColSumOp>(loc, tile(1, 1), rows))
                      : transpose(rows);
      addGrad(gates, lastRow(row, typeOf(gates)));
    }
  } else if (auto product = dyn_cast<DecayProductOp>(op)) {
    Value x = product.getLhs(), y = product.getRhs();
    Value gx = product.getLhsGates(), gy = product.getRhsGates();
    auto side = [&](ir::ProductSide s, Value other) -> Value {
      return b.create<DecayProductGradOp>(loc, other.getType(), s, dy, other,
                                          gx, gy, product.getMask());
    };
    Value dx = side(ir::ProductSide::lhs, y);
    Value dyOfRhs = side(ir::ProductSide::rhs, x);
    addGrad(x, dx);
    addGrad(y, dyOfRhs);
    // One gate column, both factors decayed by G = cumsum(g): P_ij holds
    // g_t where i >= t > j, so g's gradient is lina.straddle_sum of
    // dP . P, each pair once. (As row sums at G_i less column sums at G_j,
    // the pairs near the diagonal, which straddle nothing, would cancel
    // only to their rounding.)
    CumsumOp sums = inclusiveCumsum(gx);
    if (sums && gx == gy && typeOf(gx).getCols() == 1) {
      if (active.contains(gx)) {
        TileType square = typeOf(dy);
        addGrad(sums.getInput(),
                b.create<StraddleSumOp>(
                    loc, tile(square.getRows(), 1),
                    b.create<MulOp>(loc, dy, product.getResult())));
      }
      return success();
    }
    // The exponent Gx_ic - Gy_jc: dGx_ic = x_ic dx_ic, dGy_jc = -y_jc dy_jc.
    if (active.contains(gx))
      addGrad(gx, reduceTo(b.create<MulOp>(loc, x, dx),
                           typeOf(gx).getCols()));
    if (active.contains(gy))
      addGrad(gy, b.create<NegOp>(
                      loc, reduceTo(b.create<MulOp>(loc, y, dyOfRhs),
                                    typeOf(gy).getCols())));
  } else if (auto solve = dyn_cast<TriSolveOp>(op)) {
    // X = (I + A)^-1 R: dR = (I + A)^-T dX, dA = -(dR X^T) strictly lower.
    Value lower = solve.getLower();
    Value dr = b.create<TriSolveTransposedOp>(loc, dy.getType(), lower, dy);
    addGrad(solve.getRhs(), dr);
    if (active.contains(lower))
      addGrad(lower, b.create<NegOp>(
                         loc, b.create<StrictLowerOp>(
                                  loc, matmul(dr, transpose(solve.getResult())))));
  } else if (auto mm = dyn_cast<MatmulOp>(op)) {
    Value lhs = mm.getLhs(), rhs = mm.getRhs();
    if (!mm.getTransposeLhs()) {
      addGrad(lhs, matmul(dy, transpose(rhs)));
      addGrad(rhs, matmul(lhs, dy, /*transposeLhs=*/true));
    } else {
      addGrad(lhs, matmul(rhs, transpose(dy)));
      addGrad(rhs, matmul(lhs, dy));
    }
  } else {
    // lina.zeros has no inputs (and is never active); lina.store and
    // lina.yield are seeds, not recomputed.
    return op.emitOpError()
           << "lina-chunk-backward has no adjoint for this op";
  }
  return success();
}

Value AdjointBuilder::build(ChunkedOp forward, Value s0, Value stateGrad) {
  Block &body = forward.getBody().front();
  IRMapping mapping;
  mapping.map(body.getArgument(0), s0);
  active.insert(s0);
  Value output, newState;
  SmallVector<Operation *> recomputed;
  for (Operation &op : body) {
    if (auto store = dyn_cast<StoreOp>(op)) {
      output = mapping.lookup(store.getValue());
      continue;
    }
    if (auto yield = dyn_cast<YieldOp>(op)) {
      newState = mapping.lookup(yield.getState());
      continue;
    }
    Operation *copy = b.clone(op, mapping);
    recomputed.push_back(copy);
    // Active: a load, or anything computed from an active value.
    bool isActive = isa<LoadOp>(copy) ||
                    llvm::any_of(copy->getOperands(), [&](Value v) {
                      return active.contains(v);
                    });
    if (isActive)
      for (Value result : copy->getResults())
        active.insert(result);
  }
  addGrad(output, b.create<LoadOutputGradOp>(loc, output.getType()));
  addGrad(newState, stateGrad);
  for (Operation *op : llvm::reverse(recomputed)) {
    if (op->getNumResults() != 1)
      continue;
    auto it = grads.find(op->getResult(0));
    if (it != grads.end() && failed(adjoint(*op, it->second)))
      return nullptr;
  }
  // The recomputed output and new state only seeded the adjoints: drop
  // what nothing reads (the recomputation is pure).
  for (Operation *op : llvm::reverse(recomputed))
    if (op->use_empty())
      op->erase();
  if (Value ds0 = grads.lookup(s0))
    return ds0;
  return b.create<ZerosOp>(loc, s0.getType());
}

struct LinaChunkBackwardPass
    : public impl::LinaChunkBackwardBase<LinaChunkBackwardPass> {
  void runOnOperation() override {
    SmallVector<ChunkedOp> programs;
    getOperation().walk([&](ChunkedOp op) { programs.push_back(op); });
    for (ChunkedOp forward : programs) {
      OpBuilder b(forward->getContext());
      b.setInsertionPointAfter(forward);
      Location loc = forward.getLoc();
      // A layout the forward carries (lina-choose-schedule's, through
      // lina-chunk) is the backward's too: one thread count and value tile
      // serve a backward's kernels, the forward's state scan among them.
      ScheduleAttr layout;
      if (ScheduleAttr carried = forward.getScheduleAttr())
        layout = ScheduleAttr::get(
            forward.getContext(), carried.getTileV(), carried.getWarps(),
            ir::Strategy::fused, false, false, false, false, 1, ir::Mma::warp);
      auto backward = b.create<ChunkedBackwardOp>(
          loc, b.getStringAttr(forward.getSymName() + "_backward"),
          forward.getSpec(), forward.getChunkSizeAttr(), layout,
          PlacementAttr());
      Type state = forward.getBody().front().getArgument(0).getType();
      Block *body = b.createBlock(&backward.getBody());
      Value s0 = body->addArgument(state, loc);
      Value stateGrad = body->addArgument(state, loc);
      AdjointBuilder adjoints(b, loc);
      Value ds0 = adjoints.build(forward, s0, stateGrad);
      if (!ds0)
        return signalPassFailure();
      b.create<YieldOp>(loc, ds0);
      LLVM_DEBUG(llvm::dbgs() << "differentiated @" << forward.getSymName()
                              << "\n");
    }
  }
};

} // namespace
} // namespace lina
