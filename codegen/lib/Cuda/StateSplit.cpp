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

} // namespace

StateSplit splitAtState(ChunkedOp op,
                        const llvm::DenseMap<Value, TileShape> &fullShapes,
                        bool tensorCores) {
  // What crosses the cut is lina-cut-state's record; this lays it out. The
  // scan is the state's dependents and what they need short of the cut,
  // the stored values in the order its walk reaches them (then the
  // last-row ones, in program order) as lina-cut-state found them.
  Block &body = op.getBody().front();
  StateDependence dependence = stateDependence(op);
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
