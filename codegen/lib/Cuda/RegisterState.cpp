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
  if (folded.contains(inner))
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
  return reads;
}

bool RegisterState::inSharedMemory(Value v) const {
  if (values.contains(v))
    return false;
  Operation *def = v.getDefiningOp();
  return !(def && folded.contains(def));
}

std::optional<RegisterState>
planRegisterState(ChunkedOp op, const llvm::SetVector<Operation *> &ops,
                  const llvm::DenseMap<Value, TileShape> &shapes, int64_t tileV,
                  int64_t warps) {
  // The layout reg_state<K, VT> asserts: 16-row value tiles over the warps,
  // each warp's share of the key columns whole 16-column mma steps.
  int64_t keyDim = op.getSpec().getKeyDim();
  int64_t rowTiles = tileV / 16;
  if (tileV % 16 != 0 || rowTiles == 0 || warps % rowTiles != 0)
    return std::nullopt;
  int64_t split = warps / rowTiles;
  if (keyDim % split != 0 || (keyDim / split) % 16 != 0)
    return std::nullopt;

  RegisterState plan;
  Value state = op.getBody().front().getArgument(0);
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
      Value other = add.getLhs() == current ? add.getRhs() : add.getLhs();
      if ((add.getLhs() != current && add.getRhs() != current) ||
          isState(other))
        return std::nullopt;
      // Y^T Z read only here accumulates into the state directly.
      auto product = other.getDefiningOp<MatmulOp>();
      if (product && product.getTransposeLhs() && other.hasOneUse() &&
          ops.contains(product) && !isState(product.getLhs()) &&
          !isState(product.getRhs())) {
        plan.foldedInto[inner] = product;
        plan.folded.insert(product);
      }
      current = add.getResult();
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
  if (split > 1)
    plan.scratchFloats = split * largestProductRows * rowStride(tileV);
  return plan;
}

} // namespace lina::cuda
