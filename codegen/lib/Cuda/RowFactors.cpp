//===- RowFactors.cpp - Scaled input rows the scan rescales itself -----===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "RowFactors.h"

using namespace mlir;

namespace lina::cuda {
namespace {

/// Skips scales down from `v`, multiplying their factors into `scale`.
Value throughScales(Value v, double &scale) {
  while (auto s = v.getDefiningOp<ScaleOp>()) {
    scale *= s.getFactor().convertToDouble();
    v = s.getInput();
  }
  return v;
}

/// Whether the scan, under `plan`, reads `x` only where a row factor can
/// be applied: as X of a product X S (not as its epilogue's base), or as Y
/// of an update S + Y^T Z. Readers in the prepare kernel, and stored values
/// (which the scan loads), do not count.
bool readOnlyScaled(Value x, const StateSplit &split, const RegisterState &plan) {
  return llvm::all_of(x.getUsers(), [&](Operation *user) {
    if (!split.scanOps.contains(user) || split.stored.contains(user))
      return true;
    auto matmul = dyn_cast<MatmulOp>(user);
    if (!matmul || matmul.getLhs() != x || matmul.getRhs() == x)
      return false;
    if (plan.products.contains(user))
      return plan.epilogueBase(user) != x;
    return plan.folded.contains(user);
  });
}

} // namespace

std::optional<RowFactor>
rowFactorOf(Operation *stored, const StateSplit &split,
            const llvm::DenseMap<Value, TileShape> &shapes) {
  RowFactor factor;
  Value v = throughScales(stored->getResult(0), factor.scale);
  auto decay = v.getDefiningOp<DecayRowsOp>();
  if (!decay)
    return std::nullopt;
  Value gates = decay.getLogGates();
  auto sums = gates.getDefiningOp<CumsumOp>();
  if (shapes.lookup(gates).cols != 1 || !sums || !split.stored.contains(sums))
    return std::nullopt;
  Value rows = throughScales(decay.getInput(), factor.scale);
  // l2norm of the loaded rows (scales before it would cancel).
  if (auto norm = rows.getDefiningOp<L2NormOp>()) {
    factor.normalized = true;
    rows = norm.getInput();
  }
  auto load = rows.getDefiningOp<LoadOp>();
  if (!load || (load.getOperand() != ir::Operand::q &&
                load.getOperand() != ir::Operand::k))
    return std::nullopt;
  factor.source = load;
  factor.gates = gates;
  factor.toEnd = decay.getToEnd();
  return factor;
}

void factorRows(ChunkedOp op, StateSplit &split, const RegisterState &plan,
                const llvm::DenseMap<Value, TileShape> &fullShapes,
                bool tensorCores) {
  // Where warps split the key columns, a warp's share of a product or an
  // update is a few mma, and the factors' loads and multiplies lengthen
  // the serial step more than the loaded tiles cost: mamba2 at
  // 2x16384x16x128 (tv32 w8) went from 0.81 to 0.85 ms, while whole heads
  // (tv128 w8) went from 0.76 to 0.70 at 4x4096x64 (docs/perf-notes.md,
  // twelfth session).
  if (!plan.ownColumns)
    return;
  bool changed = false;
  for (Operation *stored : split.stored) {
    if (split.lastRowOnly.contains(stored) ||
        !readOnlyScaled(stored->getResult(0), split, plan))
      continue;
    std::optional<RowFactor> factor = rowFactorOf(stored, split, fullShapes);
    if (!factor)
      continue;
    Operation *sums = factor->gates.getDefiningOp();
    factor->slot = split.factorTables[sums]++;
    split.rowFactored[stored] = *factor;
    split.lastRowOnly.erase(sums);
    changed = true;
  }
  if (changed)
    layOutRecord(op, split, fullShapes, tensorCores);
}

} // namespace lina::cuda
