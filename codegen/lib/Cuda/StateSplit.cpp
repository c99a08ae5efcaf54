//===- StateSplit.cpp - Which work of a chunk can leave the scan -------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "StateSplit.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace lina::cuda {
namespace {

/// Ops whose cost is worth a round trip through memory when they are not
/// on the state's path: products, solves, row norms and decays of rows.
/// A decayed q or k costs the scan no more bytes than the q or k it is made
/// from (bf16 either way), and made in the scan it costs a pass over the
/// tile and a barrier on the serial path every chunk, plus an exponential
/// per element with per-channel gates: gla's scan took 3.4 ms at
/// 1x8192x96x128 recomputing its decayed q and k, 1.0 ms loading them
/// (docs/perf-notes.md). Other elementwise work on loaded tiles is cheaper
/// to redo than to store and load.
bool expensive(Operation *op) {
  return isa<MatmulOp, DecayProductOp, TriSolveOp, L2NormOp, DecayRowsOp>(op);
}

bool sliceIsExpensive(ChunkedOp chunked, Operation *root) {
  return llvm::any_of(backwardSlice(chunked, {root}), expensive);
}

/// The values whose rows are the chunk's tokens, as opposed to the state's
/// key rows (K^T V products, the state itself). Row counts cannot tell them
/// apart when key_dim equals the chunk size; the op that made a value can.
llvm::DenseSet<Value> tokenRowValues(Block &body) {
  llvm::DenseSet<Value> tokens;
  for (Operation &inner : body) {
    bool rows = llvm::TypeSwitch<Operation *, bool>(&inner)
                    .Case([](LoadOp) { return true; })
                    .Case([&](MatmulOp o) {
                      return !o.getTransposeLhs() && tokens.contains(o.getLhs());
                    })
                    .Case([](DecayProductOp) { return true; })
                    .Case([](DecayStateOp) { return false; })
                    .Case([](ZerosOp) { return false; })
                    .Case([&](TriSolveOp o) { return tokens.contains(o.getRhs()); })
                    .Default([&](Operation *other) {
                      return other->getNumOperands() > 0 &&
                             tokens.contains(other->getOperand(0));
                    });
    if (rows)
      for (Value result : inner.getResults())
        tokens.insert(result);
  }
  return tokens;
}

/// `user` reads `v` only as a tensor-core operand: a product, or a decay
/// product with one gate column (whose per-channel form sums in fp32).
bool onlyProductOperand(Operation *user, Value v,
                        const llvm::DenseMap<Value, TileShape> &shapes) {
  if (isa<MatmulOp>(user))
    return true;
  if (auto product = dyn_cast<DecayProductOp>(user))
    return shapes.find(product.getLhsGates())->second.cols == 1 &&
           v != product.getLhsGates() && v != product.getRhsGates();
  return false;
}

/// A product of a chunk-square matrix with a loaded input, (C x C)(C x V),
/// added to a product with the state: the additive rules' intra-chunk
/// output P v, in o = P v + q S. The scan redoes it from the stored P (C x
/// C, bf16, what the tensor cores would round it to anyway) and the v it
/// loads for its update, rather than load the C x V product in fp32; it is
/// then the base of q S's reduction, so it costs the scan no barrier.
/// mamba2's prepare stored 8 KB a chunk and head for it and its scan loaded
/// it once per value tile (docs/perf-notes.md).
bool redoneInScan(Operation *def, int64_t chunkRows,
                  const llvm::DenseMap<Value, TileShape> &shapes,
                  const llvm::DenseSet<Value> &stateValues) {
  auto matmul = dyn_cast<MatmulOp>(def);
  if (!matmul || matmul.getTransposeLhs() ||
      !matmul.getRhs().getDefiningOp<LoadOp>() ||
      !matmul.getResult().hasOneUse())
    return false;
  const TileShape &lhs = shapes.find(matmul.getLhs())->second;
  const TileShape &result = shapes.find(matmul.getResult())->second;
  if (lhs.rows != chunkRows || lhs.cols != chunkRows ||
      result.cols <= chunkRows)
    return false;
  auto add = dyn_cast<AddOp>(*matmul.getResult().getUsers().begin());
  if (!add)
    return false;
  Value other =
      add.getLhs() == matmul.getResult() ? add.getRhs() : add.getLhs();
  auto stateProduct = other.getDefiningOp<MatmulOp>();
  return stateProduct && stateValues.contains(stateProduct.getRhs());
}

} // namespace

StateSplit splitAtState(ChunkedOp op,
                        const llvm::DenseMap<Value, TileShape> &fullShapes,
                        bool tensorCores) {
  Block &body = op.getBody().front();
  Value state = body.getArgument(0);
  int64_t chunkRows = op.getChunkSize();

  // Ops downstream of the state, the yield among them, in program order
  // (the workspace layout, and so the source text, must not depend on
  // pointer values).
  llvm::SetVector<Operation *> dependent;
  llvm::DenseSet<Value> dependentValues{state};
  for (Operation &inner : body)
    if (llvm::any_of(inner.getOperands(),
                     [&](Value v) { return dependentValues.contains(v); })) {
      dependent.insert(&inner);
      for (Value result : inner.getResults())
        dependentValues.insert(result);
    }

  // Walk the state-independent operands of the scan's ops: store what is
  // expensive and chunk-shaped, recompute the rest (loads, elementwise work,
  // state-shaped products whose inputs are cheaper to move).
  StateSplit split;
  llvm::DenseSet<Value> tokenRows = tokenRowValues(body);
  llvm::DenseSet<Operation *> scan;
  auto collectScan = [&] {
    scan = llvm::DenseSet<Operation *>(dependent.begin(), dependent.end());
    SmallVector<Value> worklist;
    for (Operation *inner : dependent)
      for (Value operand : inner->getOperands())
        if (!dependentValues.contains(operand))
          worklist.push_back(operand);
    while (!worklist.empty()) {
      Value v = worklist.pop_back_val();
      Operation *def = v.getDefiningOp();
      if (!def || scan.contains(def) || split.stored.contains(def))
        continue;
      const TileShape &shape = fullShapes.find(v)->second;
      if (!isa<LoadOp>(def) && tokenRows.contains(v) &&
          !redoneInScan(def, chunkRows, fullShapes, dependentValues) &&
          shape.rows == chunkRows && sliceIsExpensive(op, def)) {
        split.stored.insert(def);
        continue;
      }
      scan.insert(def);
      llvm::append_range(worklist, def->getOperands());
    }
  };
  collectScan();
  // Gate sums the scan computes only to decay the state: their last row
  // crosses the cut instead (a row instead of the gate tile and its sum on
  // the serial path). Then what only they needed leaves the scan.
  for (Operation &inner : body) {
    if (!scan.contains(&inner) || dependent.contains(&inner) ||
        isa<LoadOp>(inner) || inner.getNumResults() != 1)
      continue;
    Value v = inner.getResult(0);
    bool onlyDecaysTheState =
        tokenRows.contains(v) && !v.use_empty() &&
        llvm::all_of(v.getUsers(), [&](Operation *user) {
          auto decay = dyn_cast<DecayStateOp>(user);
          return !scan.contains(user) ||
                 (decay && decay.getLogGates() == v && decay.getState() != v);
        });
    if (onlyDecaysTheState) {
      split.stored.insert(&inner);
      split.lastRowOnly.insert(&inner);
    }
  }
  if (!split.lastRowOnly.empty())
    collectScan();

  for (Operation *def : split.stored) {
    Value v = def->getResult(0);
    const TileShape &shape = fullShapes.find(v)->second;
    bool half = tensorCores && llvm::all_of(v.getUsers(), [&](Operation *user) {
      return !scan.contains(user) || onlyProductOperand(user, v, fullShapes);
    });
    if (half)
      split.mmaOperands.insert(def);
    split.offset[def] = split.recordFloats;
    split.columns[def] = shape.cols;
    int64_t rows = split.lastRowOnly.contains(def) ? 1 : shape.rows;
    int64_t floats = rows * shape.cols / (half ? 2 : 1);
    split.recordFloats += (floats + 3) / 4 * 4;
  }

  SmallVector<Operation *> storedRoots(split.stored.begin(),
                                       split.stored.end());
  if (!storedRoots.empty())
    split.prepareOps = backwardSlice(op, storedRoots);
  llvm::DenseSet<Operation *> scanSet(scan.begin(), scan.end());
  scanSet.insert(split.stored.begin(), split.stored.end());
  split.scanOps = scheduleOps(op, scanSet, split.stored);
  return split;
}

} // namespace lina::cuda
