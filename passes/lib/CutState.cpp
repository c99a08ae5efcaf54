//===- CutState.cpp - Cut each split chunk at the state -----------------===//
//
// Part of lina. lina-cut-state: for each lina.chunked of the split strategy,
// which values the chunk-parallel prepare kernel makes and stores for the
// scan, recorded on the ops that make them (StateCut.h).
//
//===----------------------------------------------------------------------===//
#include "lina/Dialect/Lina/IR/SpecConversion.h"
#include "lina/Transforms/Passes.h"
#include "lina/Transforms/StateCut.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace lina {
#define GEN_PASS_DEF_LINACUTSTATE
#include "lina/Transforms/Passes.h.inc"

Cut cutOf(Operation *op) {
  auto cut = op->getAttrOfType<StringAttr>(kCutAttr);
  if (!cut)
    return Cut::None;
  return cut.getValue() == "last_row" ? Cut::LastRow : Cut::Stored;
}

namespace {

/// The ops of `body` downstream of `carried`, among `within` (every op
/// where null).
StateDependence dependenceOn(Block &body, Value carried,
                             const llvm::DenseSet<Operation *> *within) {
  StateDependence dependence;
  dependence.values.insert(carried);
  for (Operation &inner : body)
    if ((!within || within->contains(&inner)) &&
        llvm::any_of(inner.getOperands(),
                     [&](Value v) { return dependence.values.contains(v); })) {
      dependence.ops.insert(&inner);
      for (Value result : inner.getResults())
        dependence.values.insert(result);
    }
  return dependence;
}

/// The ops the terminator of `body` needs, itself among them.
llvm::DenseSet<Operation *> yieldSlice(Block &body) {
  llvm::DenseSet<Operation *> slice;
  SmallVector<Operation *> worklist{body.getTerminator()};
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (!slice.insert(op).second)
      continue;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp())
        worklist.push_back(def);
  }
  return slice;
}

} // namespace

StateDependence stateDependence(ChunkedOp op) {
  Block &body = op.getBody().front();
  return dependenceOn(body, body.getArgument(0), nullptr);
}

StateDependence walkDependence(Block &body, Value carried) {
  llvm::DenseSet<Operation *> slice = yieldSlice(body);
  return dependenceOn(body, carried, &slice);
}

llvm::DenseSet<Operation *>
collectScanOps(const StateDependence &dependence,
               llvm::function_ref<bool(Operation *)> crosses,
               llvm::SetVector<Operation *> &stored) {
  llvm::DenseSet<Operation *> scan(dependence.ops.begin(),
                                   dependence.ops.end());
  SmallVector<Value> worklist;
  for (Operation *inner : dependence.ops)
    for (Value operand : inner->getOperands())
      if (!dependence.values.contains(operand))
        worklist.push_back(operand);
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    Operation *def = v.getDefiningOp();
    if (!def || scan.contains(def) || stored.contains(def))
      continue;
    if (crosses(def)) {
      stored.insert(def);
      continue;
    }
    scan.insert(def);
    llvm::append_range(worklist, def->getOperands());
  }
  return scan;
}

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

/// Whether `root` or an op it depends on is expensive.
bool sliceIsExpensive(Operation *root) {
  llvm::DenseSet<Operation *> seen;
  SmallVector<Operation *> worklist{root};
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (!seen.insert(op).second)
      continue;
    if (expensive(op))
      return true;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp())
        worklist.push_back(def);
  }
  return false;
}

TileType typeOf(Value v) { return cast<TileType>(v.getType()); }

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

/// A product of a chunk-square matrix with a loaded input, (C x C)(C x V),
/// added to a product with the state: the additive rules' intra-chunk
/// output P v, in o = P v + q S. The scan redoes it from the stored P (C x
/// C, bf16, what the tensor cores would round it to anyway) and the v it
/// loads for its update, rather than load the C x V product in fp32; it is
/// then the base of q S's reduction, so it costs the scan no barrier.
/// mamba2's prepare stored 8 KB a chunk and head for it and its scan loaded
/// it once per value tile (docs/perf-notes.md).
bool redoneInScan(Operation *def, int64_t chunkRows,
                  const llvm::DenseSet<Value> &stateValues) {
  auto matmul = dyn_cast<MatmulOp>(def);
  if (!matmul || matmul.getTransposeLhs() ||
      !matmul.getRhs().getDefiningOp<LoadOp>() ||
      !matmul.getResult().hasOneUse())
    return false;
  TileType lhs = typeOf(matmul.getLhs()), result = typeOf(matmul.getResult());
  if (lhs.getRows() != chunkRows || lhs.getCols() != chunkRows ||
      result.getCols() <= chunkRows)
    return false;
  auto add = dyn_cast<AddOp>(*matmul.getResult().getUsers().begin());
  if (!add)
    return false;
  Value other =
      add.getLhs() == matmul.getResult() ? add.getRhs() : add.getLhs();
  auto stateProduct = other.getDefiningOp<MatmulOp>();
  return stateProduct && stateValues.contains(stateProduct.getRhs());
}

/// Records the cut of a chunk `body` of `chunkRows` tokens whose walk runs
/// `dependence` and what it needs: what is expensive and chunk-shaped
/// crosses it; loads, elementwise work and state-shaped products whose
/// inputs are cheaper to move stay in the scan. Then gate sums the scan
/// computes only to decay the state cross it as their last row (a row
/// instead of the gate tile and its sum on the serial path).
void cut(Block &body, int64_t chunkRows, const StateDependence &dependence) {
  llvm::DenseSet<Value> tokenRows = tokenRowValues(body);
  llvm::SetVector<Operation *> stored;
  llvm::DenseSet<Operation *> scan =
      collectScanOps(dependence, [&](Operation *def) {
        if (isa<LoadOp>(def) || def->getNumResults() != 1)
          return false;
        Value v = def->getResult(0);
        return tokenRows.contains(v) &&
               !redoneInScan(def, chunkRows, dependence.values) &&
               typeOf(v).getRows() == chunkRows && sliceIsExpensive(def);
      }, stored);
  llvm::SetVector<Operation *> lastRow;
  for (Operation &inner : body) {
    if (!scan.contains(&inner) || dependence.ops.contains(&inner) ||
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
    if (onlyDecaysTheState)
      lastRow.insert(&inner);
  }
  Builder b(body.getParentOp()->getContext());
  for (Operation *inner : stored)
    inner->setAttr(kCutAttr, b.getStringAttr("stored"));
  for (Operation *inner : lastRow)
    inner->setAttr(kCutAttr, b.getStringAttr("last_row"));
}

/// Whether the walk of `body`, what its yield needs, would solve a
/// triangular system each chunk: the delta and DPLR rules' UT transform.
bool solves(Block &body) {
  return llvm::any_of(yieldSlice(body),
                      [](Operation *op) { return isa<TriSolveOp>(op); });
}

/// A backward's two scans walk a chunk each and are cut as a split
/// chunk's scan: the forward's, for the states before every chunk (what
/// its yield needs), and the backward's, for the state's gradient (what
/// its yield needs, carrying its last argument). Their stored values come
/// from chunk-parallel prepare kernels, so the walks that cannot be
/// parallel run only what depends on what they carry; the two run side by
/// side, so the backward waits for the longer.
///
/// A scan is cut where it would solve: the additive rules' walks are short
/// already, and their prepare kernels and records cost more than they save
/// (gla at 4 x 2048 x 16 x 128 on an H200: the scans 0.67 ms either way, a
/// training step 5 % slower and 70 MiB larger cut). Where they solve,
/// cutting both pays: gdn's scans 1.62 -> 1.15 ms, rwkv7's 2.77 -> 1.91
/// ms, and KDA's, with both scans fetching ahead, 1.25 -> 0.57 ms, its
/// backward 3.74 -> 3.07 ms on an H100, for a prepare kernel (0.24 ms) and
/// the record's solved values (68 MiB at that shape in fp32, a training
/// step of 884 MiB instead of 815; half that since the record keeps U in
/// bf16, StateSplit.h).
void cutBackwardScans(ChunkedOp forward, ChunkedBackwardOp backward) {
  Block &states = forward.getBody().front();
  if (solves(states))
    cut(states, forward.getChunkSize(),
        walkDependence(states, states.getArgument(0)));
  Block &grads = backward.getBody().front();
  if (solves(grads))
    cut(grads, backward.getChunkSize(),
        walkDependence(grads, grads.getArguments().back()));
}

struct LinaCutStatePass : public impl::LinaCutStateBase<LinaCutStatePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Recorded afresh: a cut of another schedule does not carry over.
    module.walk([&](Operation *op) {
      if (isa<ChunkedOp, ChunkedBackwardOp>(op))
        for (Operation &inner : op->getRegion(0).front())
          inner.removeAttr(kCutAttr);
    });
    auto forwards = module.getOps<ChunkedOp>();
    auto backwards = module.getOps<ChunkedBackwardOp>();
    // A backward's module holds one lina.chunked, its forward, whatever its
    // strategy: its scan is the backward's states scan.
    if (!backwards.empty()) {
      if (std::distance(forwards.begin(), forwards.end()) == 1 &&
          std::distance(backwards.begin(), backwards.end()) == 1)
        cutBackwardScans(*forwards.begin(), *backwards.begin());
      return;
    }
    for (ChunkedOp op : forwards) {
      ScheduleAttr schedule = op.getScheduleAttr();
      if (schedule && schedule.getStrategy() == ir::Strategy::split &&
          schedule.getMma() != ir::Mma::warpgroup)
        cut(op.getBody().front(), op.getChunkSize(), stateDependence(op));
    }
  }
};

} // namespace
} // namespace lina
