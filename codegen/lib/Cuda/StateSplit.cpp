//===- StateSplit.cpp - Which work of a chunk can leave the scan -------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "StateSplit.h"

#include "lina/Transforms/StateCut.h"

using namespace mlir;

namespace lina::cuda {
namespace {

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

/// `user` reads `v` only as a tensor-core operand, or transposes it for
/// products alone (the emitter then reads it transposed, folding the
/// transpose into them).
bool readsAsProduct(Operation *user, Value v,
                    const llvm::DenseMap<Value, TileShape> &shapes) {
  if (auto transpose = dyn_cast<TransposeOp>(user))
    return llvm::all_of(transpose->getUsers(), [&](Operation *reader) {
      auto matmul = dyn_cast<MatmulOp>(reader);
      return matmul && matmul.getRhs() == transpose.getResult() &&
             matmul.getLhs() != transpose.getResult();
    });
  return onlyProductOperand(user, v, shapes);
}

/// The ops of a backward's chunk-parallel gradients kernel: its
/// accumulates and what they need.
llvm::DenseSet<Operation *> gradientsKernelOps(Block &body) {
  SmallVector<Operation *> roots;
  for (AccumulateOp accumulate : body.getOps<AccumulateOp>())
    roots.push_back(accumulate);
  llvm::DenseSet<Operation *> ops;
  if (!roots.empty())
    for (Operation *inner : backwardSlice(body, roots))
      ops.insert(inner);
  return ops;
}

} // namespace

StateSplit splitAtState(ChunkedOp op,
                        const llvm::DenseMap<Value, TileShape> &fullShapes,
                        bool tensorCores) {
  return splitAtState(op.getBody().front(), stateDependence(op), fullShapes,
                      tensorCores);
}

StateSplit splitAtState(Block &body, const StateDependence &dependence,
                        const llvm::DenseMap<Value, TileShape> &fullShapes,
                        bool tensorCores,
                        const llvm::DenseSet<Operation *> &alsoLoading,
                        bool roundForSize) {
  // What crosses the cut is lina-cut-state's record; this lays it out. The
  // scan is the state's dependents and what they need short of the cut,
  // the stored values in the order its walk reaches them (then the
  // last-row ones, in program order) as lina-cut-state found them.
  StateSplit split;
  llvm::DenseSet<Operation *> scan = collectScanOps(
      dependence, [](Operation *def) { return cutOf(def) == Cut::Stored; },
      split.stored);
  for (Operation &inner : body)
    if (cutOf(&inner) == Cut::LastRow) {
      split.stored.insert(&inner);
      split.lastRowOnly.insert(&inner);
    }
  if (!split.lastRowOnly.empty())
    scan = collectScanOps(
        dependence, [](Operation *def) { return cutOf(def) == Cut::Stored; },
        split.stored);

  for (Operation *def : split.stored) {
    Value v = def->getResult(0);
    const TileShape &shape = fullShapes.find(v)->second;
    // An R x R tile costs the scan little in fp32, and a kernel that also
    // loads it may then read it elementwise (gradientsSplit).
    const bool square = !shape.valueColumns && shape.rows == shape.cols;
    bool half = tensorCores && llvm::all_of(v.getUsers(), [&](Operation *user) {
                  if (scan.contains(user))
                    return onlyProductOperand(user, v, fullShapes);
                  return !square || !alsoLoading.contains(user) ||
                         readsAsProduct(user, v, fullShapes);
                });
    const bool lastRow = split.lastRowOnly.contains(def);
    if (!half && roundForSize && !square && !lastRow) {
      half = true;
      split.roundedInRecord.insert(def);
    }
    if (half)
      split.halfStored.insert(def);
    split.offset[def] = split.recordFloats;
    split.columns[def] = shape.cols;
    int64_t rows = lastRow ? 1 : shape.rows;
    int64_t floats = rows * shape.cols / (half ? 2 : 1);
    split.floats[def] = (floats + 3) / 4 * 4;
    split.recordFloats += split.floats[def];
  }

  SmallVector<Operation *> storedRoots(split.stored.begin(),
                                       split.stored.end());
  if (!storedRoots.empty())
    split.prepareOps = backwardSlice(body, storedRoots);
  llvm::DenseSet<Operation *> scanSet(scan.begin(), scan.end());
  scanSet.insert(split.stored.begin(), split.stored.end());
  split.scanOps = scheduleOps(body, scanSet, split.stored);
  return split;
}

/// `op`'s attributes but the planning passes' records (`lina.*`: where a
/// kernel keeps it, what crosses a cut), which say nothing of its value.
static llvm::SmallVector<NamedAttribute> valueAttributes(Operation *op) {
  llvm::SmallVector<NamedAttribute> kept;
  for (NamedAttribute attr : op->getAttrDictionary())
    if (!attr.getName().getValue().starts_with("lina."))
      kept.push_back(attr);
  return kept;
}

/// The op of `first` that computes what `op` (of another block) computes:
/// the same op with the same attributes and types, on operands that are
/// alike (made by alike ops, or both the chunk's state, argument 0). Null
/// where none does. `alike` maps values of `op`'s block to `first`'s.
static Operation *alikeIn(Block &first, Operation *op,
                          llvm::DenseMap<Value, Value> &alike) {
  auto same = [&](Value a, Value b) {
    if (auto arg = dyn_cast<BlockArgument>(a)) {
      auto other = dyn_cast<BlockArgument>(b);
      return other && arg.getArgNumber() == 0 && other.getArgNumber() == 0;
    }
    auto it = alike.find(a);
    return it != alike.end() && it->second == b;
  };
  for (Operation &candidate : first) {
    if (candidate.getName() != op->getName() ||
        candidate.getResultTypes() != op->getResultTypes() ||
        candidate.getNumOperands() != op->getNumOperands() ||
        valueAttributes(&candidate) != valueAttributes(op) ||
        !llvm::all_of(llvm::zip(op->getOperands(), candidate.getOperands()),
                      [&](auto pair) {
                        return same(std::get<0>(pair), std::get<1>(pair));
                      }))
      continue;
    for (auto [a, b] : llvm::zip(op->getResults(), candidate.getResults()))
      alike[a] = b;
    return &candidate;
  }
  return nullptr;
}

StateSplit walkSplit(Block &body, Value carried,
                     const llvm::DenseMap<Value, TileShape> &fullShapes,
                     const Spec &spec) {
  const bool sixteenBit = spec.dtype != DType::F32;
  return splitAtState(body, walkDependence(body, carried), fullShapes,
                      sixteenBit, gradientsKernelOps(body), sixteenBit);
}

StateSplit gradientsSplit(Block &body, const StateSplit &grads,
                          const StateSplit *states, ArrayRef<Operation *> roots,
                          const llvm::DenseMap<Value, TileShape> &shapes) {
  StateSplit split;
  llvm::SetVector<Operation *> kernel = backwardSlice(body, roots);
  // Loads `def` as `from`'s record holds `held`.
  auto load = [&](Operation *def, const StateSplit &from, Operation *held) {
    if (from.lastRowOnly.contains(held) || !kernel.contains(def) ||
        split.stored.contains(def))
      return;
    Value v = def->getResult(0);
    bool half = from.halfStored.contains(held);
    if (half && !from.roundedInRecord.contains(held) &&
        !llvm::all_of(v.getUsers(), [&](Operation *user) {
          return !kernel.contains(user) || readsAsProduct(user, v, shapes);
        }))
      return;
    split.stored.insert(def);
    split.offset[def] = from.offset.lookup(held);
    split.columns[def] = from.columns.lookup(held);
    split.floats[def] = from.floats.lookup(held);
    if (half)
      split.halfStored.insert(def);
  };
  for (Operation *def : grads.stored)
    load(def, grads, def);
  if (states && !states->stored.empty()) {
    Block &first = *states->stored.front()->getBlock();
    llvm::DenseMap<Value, Value> alike;
    for (Operation &inner : body)
      if (Operation *twin = alikeIn(first, &inner, alike);
          twin && states->stored.contains(twin))
        load(&inner, *states, twin);
  }
  split.recordFloats = grads.recordFloats;
  // The roots and what they need, short of the loaded values' operands.
  llvm::DenseSet<Operation *> needed(roots.begin(), roots.end());
  for (Operation &inner : llvm::reverse(body)) {
    if (!needed.contains(&inner) || split.stored.contains(&inner))
      continue;
    for (Value operand : inner.getOperands())
      if (Operation *def = operand.getDefiningOp())
        needed.insert(def);
  }
  split.scanOps = byRecordedInterval(scheduleOps(body, needed, split.stored));
  return split;
}

void shareRecord(StateSplit &first, StateSplit &second) {
  if (second.stored.empty()) {
    second.recordFloats = first.recordFloats;
    return;
  }
  Block &secondBody = *second.stored.front()->getBlock();
  // Which values of the second body the first computes alike, in program
  // order (operands before their users).
  llvm::DenseMap<Value, Value> alike;
  llvm::DenseMap<Operation *, Operation *> twin;
  if (!first.stored.empty())
    for (Operation &op : secondBody)
      if (Operation *found =
              alikeIn(*first.stored.front()->getBlock(), &op, alike))
        twin[&op] = found;
  int64_t floats = first.recordFloats;
  SmallVector<Operation *> roots;
  for (Operation *def : second.stored) {
    Operation *other = twin.lookup(def);
    bool shared =
        other && first.stored.contains(other) &&
        first.halfStored.contains(other) == second.halfStored.contains(def) &&
        first.lastRowOnly.contains(other) == second.lastRowOnly.contains(def) &&
        first.columns.lookup(other) == second.columns.lookup(def);
    if (shared) {
      second.offset[def] = first.offset.lookup(other);
      second.storedElsewhere.insert(def);
      continue;
    }
    second.offset[def] = floats;
    floats += second.floats.lookup(def);
    roots.push_back(def);
  }
  first.recordFloats = second.recordFloats = floats;
  second.prepareOps.clear();
  if (!roots.empty())
    second.prepareOps = backwardSlice(secondBody, roots);
}

} // namespace lina::cuda
