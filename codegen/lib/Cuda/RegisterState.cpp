//===- RegisterState.cpp - Whether a scan's state fits in registers ----===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "RegisterState.h"

using namespace mlir;

namespace lina::cuda {

SmallVector<Value, 4> RegisterState::tileReads(Operation *inner) const {
  SmallVector<Value, 4> reads;
  if (printsNothing(inner))
    return reads;
  auto addIfShared = [&](Value v) {
    if (inSharedMemory(v))
      reads.push_back(v);
  };
  for (Value operand : inner->getOperands())
    addIfShared(operand);
  if (Operation *product = foldedInto.lookup(inner))
    for (Value operand : product->getOperands())
      addIfShared(operand);
  if (auto terms = sumTerms.find(inner); terms != sumTerms.end())
    for (const StateTerm &term : terms->second)
      if (term.product)
        for (Value operand : term.product->getOperands())
          addIfShared(operand);
  if (Value base = epilogueBase(inner))
    addIfShared(base);
  if (Operation *second = hoisted.lookup(inner))
    addIfShared(cast<MatmulOp>(second).getLhs());
  if (Operation *product = fusedProduct.lookup(inner))
    addIfShared(cast<MatmulOp>(product).getLhs());
  return reads;
}

SmallVector<Value, 2> RegisterState::tileWrites(Operation *inner) const {
  SmallVector<Value, 2> writes;
  // A fused matmul writes the output; its product prints nothing.
  if (epilogueOps.contains(inner) || fusedMatmul.count(inner) ||
      fusedProduct.count(inner))
    return writes;
  if (Operation *consumer = epilogue.lookup(inner))
    writes.push_back(consumer->getResult(0));
  for (Value result : inner->getResults())
    if (inSharedMemory(result))
      writes.push_back(result);
  return writes;
}

StringRef stateUse(const RegisterState &plan, Operation *inner) {
  if (plan.hoistedProducts.contains(inner))
    return "hoisted";
  if (plan.products.contains(inner))
    return "product";
  if (plan.folded.contains(inner))
    return "folded";
  if (plan.epilogueOps.contains(inner))
    return "epilogue";
  if (plan.reduces.count(inner))
    return "reduces";
  if (plan.fusedProduct.count(inner))
    return "fused";
  return "";
}

/// The operand of the binary op `binary` that is not `v`.
static Value otherOperand(Operation *binary, Value v) {
  return binary->getOperand(0) == v ? binary->getOperand(1)
                                    : binary->getOperand(0);
}

Value RegisterState::epilogueBase(Operation *product) const {
  Operation *consumer = epilogue.lookup(product);
  return consumer ? otherOperand(consumer, product->getResult(0)) : Value();
}

int RegisterState::epilogueSign(Operation *product) const {
  Operation *consumer = epilogue.lookup(product);
  return consumer && isa<SubOp>(consumer) ? -1 : 1;
}

bool RegisterState::inSharedMemory(Value v) const {
  if (values.contains(v))
    return false;
  Operation *def = v.getDefiningOp();
  return !(def && (folded.contains(def) || epilogue.count(def) ||
                   fusedProduct.count(def)));
}

/// The add or sub right after `product` in `ops` that is the only reader of
/// its result and can take it in the reduction pass (above), or null.
static Operation *
foldableEpilogue(Operation *product, const llvm::SetVector<Operation *> &ops,
                 const llvm::DenseMap<Value, TileShape> &shapes,
                 const RegisterState &plan) {
  Value xs = product->getResult(0);
  if (!xs.hasOneUse())
    return nullptr;
  Operation *consumer = *xs.getUsers().begin();
  auto next = std::next(llvm::find(ops, product));
  if (next == ops.end() || *next != consumer)
    return nullptr;
  bool sub = isa<SubOp>(consumer);
  if (!sub && !isa<AddOp>(consumer))
    return nullptr;
  // T - X S, not X S - T.
  if (sub && consumer->getOperand(1) != xs)
    return nullptr;
  // (One use: X S is not both operands.)
  Value base = otherOperand(consumer, xs);
  Value result = consumer->getResult(0);
  if (plan.values.contains(base) ||
      shapes.lookup(base).floats() != shapes.lookup(xs).floats() ||
      shapes.lookup(result).floats() != shapes.lookup(xs).floats())
    return nullptr;
  return consumer;
}

/// Pairs each product with the next product of the same state whose X is
/// in shared memory by then (see RegisterState::hoisted). Nothing between
/// the two may use the scratch (a per-channel decay product of a fused scan
/// does), or it would overwrite the hoisted partials.
static void hoistProducts(RegisterState &plan,
                          const llvm::SetVector<Operation *> &ops) {
  for (size_t i = 0; i < ops.size(); ++i) {
    auto first = dyn_cast<MatmulOp>(ops[i]);
    if (!first || !plan.products.contains(first) ||
        plan.hoistedProducts.contains(first))
      continue;
    for (size_t j = i + 1; j < ops.size(); ++j) {
      if (isa<DecayProductOp>(ops[j]))
        break;
      auto second = dyn_cast<MatmulOp>(ops[j]);
      if (!second || !plan.products.contains(second))
        continue;
      Operation *x = second.getLhs().getDefiningOp();
      bool ready = x && llvm::is_contained(ops.getArrayRef().take_front(i), x);
      if (second.getRhs() == first.getRhs() && ready) {
        plan.hoisted[first] = second;
        plan.hoistedProducts.insert(second);
        plan.scratchFloats = 2 * plan.scratchRegionFloats;
        Value base = plan.epilogueBase(second);
        auto matmul = base ? base.getDefiningOp<MatmulOp>() : MatmulOp();
        if (matmul && plan.epilogueSign(second) == 1 && base.hasOneUse() &&
            ops[j - 1] == matmul.getOperation() &&
            !plan.products.contains(matmul) &&
            !plan.folded.contains(matmul)) {
          plan.reducedBy[second] = matmul;
          plan.reduces[matmul] = second;
        }
      }
      break;
    }
  }
}

/// With ownColumns: pairs each product T + X S (an epilogue) whose T is a
/// matmul A B read only there, and whose sum is only stored, with that
/// matmul (RegisterState::fusedMatmul). The matmul runs the product at its
/// own place, so X and the state the product reads must be there by then:
/// X made before the matmul, and no state op between the two.
static void fuseMatmuls(RegisterState &plan,
                        const llvm::SetVector<Operation *> &ops,
                        const llvm::DenseMap<Value, TileShape> &shapes,
                        int64_t tileV) {
  auto position = [&](Value v) -> int64_t {
    Operation *def = v.getDefiningOp();
    return def && ops.contains(def) ? llvm::find(ops, def) - ops.begin() : -1;
  };
  for (auto [product, consumer] : plan.epilogue) {
    Value base = plan.epilogueBase(product);
    auto matmul = base.getDefiningOp<MatmulOp>();
    Value sum = consumer->getResult(0);
    if (!matmul || plan.epilogueSign(product) != 1 || !base.hasOneUse() ||
        !ops.contains(matmul) || plan.products.contains(matmul) ||
        plan.folded.contains(matmul) || !sum.hasOneUse() ||
        !isa<StoreOp>(*sum.getUsers().begin()))
      continue;
    const TileShape &lhs = shapes.lookup(matmul.getLhs());
    int64_t contraction = matmul.getTransposeLhs() ? lhs.rows : lhs.cols;
    if (shapes.lookup(matmul.getRhs()).cols != tileV || contraction % 16 != 0)
      continue;
    int64_t at = position(matmul.getResult());
    auto xs = cast<MatmulOp>(product);
    if (position(xs.getLhs()) >= at || position(xs.getRhs()) >= at)
      continue;
    plan.fusedMatmul[product] = matmul;
    plan.fusedProduct[matmul] = product;
  }
}

/// Y^T Z read only by `reader`, whose operands are tiles: a product the
/// state's update can fold into the accumulators.
static bool foldable(Value term, const llvm::SetVector<Operation *> &ops,
                     llvm::function_ref<bool(Value)> isState) {
  auto product = term.getDefiningOp<MatmulOp>();
  return product && product.getTransposeLhs() && term.hasOneUse() &&
         ops.contains(product) && !isState(product.getLhs()) &&
         !isState(product.getRhs());
}

std::optional<RegisterState>
planRegisterState(ChunkedOp op, const llvm::SetVector<Operation *> &ops,
                  const llvm::DenseMap<Value, TileShape> &shapes, int64_t tileV,
                  int64_t warps) {
  return planRegisterState(op.getBody().front().getArgument(0),
                           op.getSpec().getKeyDim(), ops, shapes, tileV, warps);
}

std::optional<RegisterState>
planRegisterState(Value state, int64_t keyDim,
                  const llvm::SetVector<Operation *> &ops,
                  const llvm::DenseMap<Value, TileShape> &shapes, int64_t tileV,
                  int64_t warps) {
  // The layout reg_state<K, VT> asserts: 16-row value tiles over the warps,
  // each warp's share of the key columns whole 16-column mma steps.
  int64_t rowTiles = tileV / 16;
  if (tileV % 16 != 0 || rowTiles == 0 || warps % rowTiles != 0)
    return std::nullopt;
  int64_t split = warps / rowTiles;
  if (keyDim % split != 0 || (keyDim / split) % 16 != 0)
    return std::nullopt;

  RegisterState plan;
  Value current = state;
  plan.values.insert(state);
  bool yielded = false;
  int64_t largestProductRows = 0;
  auto isState = [&](Value v) { return plan.values.contains(v); };
  for (Operation *inner : ops) {
    if (llvm::none_of(inner->getOperands(), isState))
      continue;
    if (auto matmul = dyn_cast<MatmulOp>(inner)) {
      // X S: the state on the right, untransposed X.
      if (matmul.getRhs() != current || isState(matmul.getLhs()) ||
          matmul.getTransposeLhs())
        return std::nullopt;
      plan.products.insert(inner);
      largestProductRows =
          std::max(largestProductRows, shapes.lookup(matmul.getResult()).rows);
    } else if (auto decay = dyn_cast<DecayStateOp>(inner)) {
      if (decay.getState() != current || isState(decay.getLogGates()))
        return std::nullopt;
      current = decay.getResult();
      plan.values.insert(current);
    } else if (auto add = dyn_cast<AddOp>(inner)) {
      Value other = otherOperand(add, current);
      if ((add.getLhs() != current && add.getRhs() != current) ||
          isState(other))
        return std::nullopt;
      // Y^T Z read only here accumulates into the state directly.
      if (foldable(other, ops, isState)) {
        Operation *product = other.getDefiningOp();
        plan.foldedInto[inner] = product;
        plan.folded.insert(product);
      }
      current = add.getResult();
      plan.values.insert(current);
    } else if (auto sum = dyn_cast<SumOp>(inner)) {
      // The state once, added; every other term a tile or a foldable
      // product (no elementwise products: the accumulators hold S^T's
      // fragments, not whole tiles to multiply).
      SmallVector<StateTerm, 4> terms;
      bool found = false;
      for (const SumOp::Term &term : sum.getTerms()) {
        if (term.rhs)
          return std::nullopt;
        if (term.lhs == current && !term.subtracted && !found) {
          found = true;
          continue;
        }
        if (isState(term.lhs))
          return std::nullopt;
        StateTerm stateTerm{term.lhs, nullptr, term.subtracted ? -1 : 1};
        if (foldable(term.lhs, ops, isState)) {
          stateTerm.product = term.lhs.getDefiningOp();
          plan.folded.insert(stateTerm.product);
        }
        terms.push_back(stateTerm);
      }
      if (!found)
        return std::nullopt;
      plan.sumTerms[inner] = std::move(terms);
      current = sum.getResult();
      plan.values.insert(current);
    } else if (auto yield = dyn_cast<YieldOp>(inner)) {
      if (yield.getState() != current)
        return std::nullopt;
      yielded = true;
    } else {
      return std::nullopt;
    }
  }
  if (!yielded)
    return std::nullopt;
  for (Operation *product : plan.products)
    if (Operation *consumer = foldableEpilogue(product, ops, shapes, plan)) {
      plan.epilogue[product] = consumer;
      plan.epilogueOps[consumer] = product;
    }
  if (split > 1) {
    plan.scratchRegionFloats = split * largestProductRows * rowStride(tileV);
    plan.scratchFloats = plan.scratchRegionFloats;
    hoistProducts(plan, ops);
  } else {
    plan.ownColumns = true;
    fuseMatmuls(plan, ops, shapes, tileV);
  }
  return plan;
}

} // namespace lina::cuda
