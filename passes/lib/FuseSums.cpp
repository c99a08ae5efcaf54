//===- FuseSums.cpp - One op for each of a backward's sums -------------===//
//
// Part of lina. lina-fuse-sums: differentiation writes a value's gradient
// as one add per reader of the value and a gate's gradient as the row sum
// of an elementwise product. Each is a pass over a tile (on the GPU, a
// tile in shared memory and a barrier after it); the folded forms,
// lina.sum over the tree's leaves and lina.row_dot, read each leaf once and
// write one result; a tree whose leaves are all negated (the gradient
// through two negs) is a sum with every term subtracted, one pass instead
// of three. A leaf that is a product read nowhere else becomes a
// product term of the sum, its tile never made. A row dot of a decayed
// state is the row dot of the state, decayed: a K x 1 tile instead of a
// K x V one.
//
//===----------------------------------------------------------------------===//
#include "lina/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

using namespace mlir;

namespace lina {
#define GEN_PASS_DEF_LINAFUSESUMS
#include "lina/Transforms/Passes.h.inc"

namespace {

bool isSumOp(Operation *op) { return op && isa<AddOp, SubOp, NegOp>(op); }

/// Whether `v` is an add, a sub or a neg whose one reader is another, so
/// that its operands join the reader's sum.
bool foldable(Value v) {
  return isSumOp(v.getDefiningOp()) && v.hasOneUse() &&
         isSumOp(*v.getUsers().begin());
}

struct Leaves {
  SmallVector<Value, 8> added, subtracted;
  /// The folded adds, subs and negs below the root, which die with it.
  SmallVector<Operation *, 8> inner;
  bool negated = false;
};

/// Adds `v`, taken with sign `plus`, and the tree below it to `leaves`. An
/// explicit stack, not recursion: a long chain of adds in a hand-written
/// program must not overflow the call stack.
void collect(Value v, bool plus, Leaves &leaves) {
  SmallVector<std::pair<Value, bool>, 16> pending{{v, plus}};
  while (!pending.empty()) {
    auto [value, sign] = pending.pop_back_val();
    if (!foldable(value)) {
      (sign ? leaves.added : leaves.subtracted).push_back(value);
      continue;
    }
    Operation *def = value.getDefiningOp();
    leaves.inner.push_back(def);
    // Right operands first, so the left ones come off the stack first and
    // the leaves keep the order of the expression.
    if (auto neg = dyn_cast<NegOp>(def)) {
      leaves.negated = true;
      pending.push_back({neg.getInput(), !sign});
    } else if (auto add = dyn_cast<AddOp>(def)) {
      pending.push_back({add.getRhs(), sign});
      pending.push_back({add.getLhs(), sign});
    } else {
      auto sub = cast<SubOp>(def);
      pending.push_back({sub.getRhs(), !sign});
      pending.push_back({sub.getLhs(), sign});
    }
  }
}

/// Products whose second factor would come past this many tiles of the
/// sum stay tiles: the CUDA emitter marks a sum's product factors in a
/// 64-bit mask.
constexpr size_t kMaxProductTiles = 64;

/// `leaf` as a term of a sum whose terms so far have `tiles` tiles: the
/// factors of an elementwise product that nothing else reads (its tile is
/// then never made), else the leaf.
SumOp::Term termOf(Value leaf, size_t &tiles, bool subtracted,
                   SmallVectorImpl<Operation *> &products) {
  auto mul = leaf.getDefiningOp<MulOp>();
  if (!mul || !leaf.hasOneUse() || tiles + 2 > kMaxProductTiles) {
    ++tiles;
    return {leaf, Value(), subtracted};
  }
  tiles += 2;
  products.push_back(mul);
  return {mul.getLhs(), mul.getRhs(), subtracted};
}

/// Folds the tree whose root is the add, sub or neg `root`; returns
/// whether it changed anything.
bool foldSum(Operation *root) {
  Leaves leaves;
  if (auto add = dyn_cast<AddOp>(root)) {
    collect(add.getLhs(), true, leaves);
    collect(add.getRhs(), true, leaves);
  } else if (auto sub = dyn_cast<SubOp>(root)) {
    collect(sub.getLhs(), true, leaves);
    collect(sub.getRhs(), false, leaves);
  } else {
    collect(cast<NegOp>(root).getInput(), false, leaves);
    leaves.negated = true;
  }
  size_t count = leaves.added.size() + leaves.subtracted.size();
  if (count < 2)
    return false;
  SmallVector<SumOp::Term, 8> terms;
  SmallVector<Operation *, 8> products;
  size_t tiles = 0;
  for (Value leaf : leaves.added)
    terms.push_back(termOf(leaf, tiles, false, products));
  for (Value leaf : leaves.subtracted)
    terms.push_back(termOf(leaf, tiles, true, products));
  // Two leaves are an add or a sub already, unless a neg or a product
  // folds away; two negated ones are a sum with both subtracted.
  if (count == 2 && !leaves.negated && products.empty())
    return false;
  OpBuilder b(root);
  Value folded;
  if (count == 2 && products.empty() && !leaves.added.empty()) {
    Value lhs = leaves.added.front();
    Value rhs = leaves.added.size() == 2 ? leaves.added.back()
                                         : leaves.subtracted.front();
    folded = leaves.added.size() == 2
                 ? b.create<AddOp>(root->getLoc(), lhs, rhs).getResult()
                 : b.create<SubOp>(root->getLoc(), lhs, rhs).getResult();
  } else {
    SmallVector<Value, 16> added, subtracted;
    SmallVector<int64_t, 16> factors;
    for (const SumOp::Term &term : terms) {
      SmallVectorImpl<Value> &side = term.subtracted ? subtracted : added;
      side.push_back(term.lhs);
      if (term.rhs)
        side.push_back(term.rhs);
      factors.push_back(term.rhs ? 2 : 1);
    }
    DenseI64ArrayAttr factorsAttr =
        products.empty() ? nullptr : b.getDenseI64ArrayAttr(factors);
    folded = b.create<SumOp>(root->getLoc(), root->getResult(0).getType(),
                             added, subtracted, factorsAttr);
  }
  root->getResult(0).replaceAllUsesWith(folded);
  root->erase();
  // Each inner op's one reader was folded before it (the list runs from
  // the root down), so it is dead by the time it is erased; each product's
  // one reader was in the tree.
  for (Operation *inner : leaves.inner)
    inner->erase();
  for (Operation *product : products)
    product->erase();
  return true;
}

void fuseSums(Block &body) {
  // A product read only by a row sum: its tile is never needed.
  SmallVector<RowSumOp> rowSums(body.getOps<RowSumOp>());
  for (RowSumOp sum : rowSums) {
    auto mul = sum.getInput().getDefiningOp<MulOp>();
    if (!mul || !sum.getInput().hasOneUse())
      continue;
    OpBuilder b(sum);
    Value dot = b.create<RowDotOp>(sum.getLoc(), sum.getType(), mul.getLhs(),
                                   mul.getRhs());
    sum.getResult().replaceAllUsesWith(dot);
    sum.erase();
    mul.erase();
  }
  // A row dot of a decayed state read nowhere else: the decay, a factor a
  // row, moves onto the K x 1 row dot, and the decayed K x V state is never
  // made (a gate's gradient through the state's decay).
  SmallVector<RowDotOp> dots(body.getOps<RowDotOp>());
  for (RowDotOp dot : dots) {
    for (OpOperand *decayed : {&dot->getOpOperand(0), &dot->getOpOperand(1)}) {
      auto decay = decayed->get().getDefiningOp<DecayStateOp>();
      if (!decay || !decay.getResult().hasOneUse())
        continue;
      OpBuilder b(dot);
      decayed->set(decay.getState());
      b.setInsertionPointAfter(dot);
      auto moved = b.create<DecayStateOp>(dot.getLoc(), dot.getType(),
                                          dot.getResult(), decay.getLogGates());
      dot.getResult().replaceAllUsesExcept(moved.getResult(), moved);
      decay.erase();
      break;
    }
  }
  // The roots are the adds, subs and negs no foldable op sits above:
  // walking backwards meets each root before the ops folded into it.
  SmallVector<Operation *> roots;
  for (Operation &inner : llvm::reverse(body.without_terminator()))
    if (isSumOp(&inner) && !foldable(inner.getResult(0)))
      roots.push_back(&inner);
  for (Operation *root : roots)
    foldSum(root);
}

struct LinaFuseSumsPass : public impl::LinaFuseSumsBase<LinaFuseSumsPass> {
  void runOnOperation() override {
    getOperation().walk(
        [](ChunkedBackwardOp op) { fuseSums(op.getBody().front()); });
  }
};

} // namespace
} // namespace lina
