//===- RowPass.cpp - Chains of row-wise ops done in registers ----------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "RowPass.h"

#include "llvm/ADT/TypeSwitch.h"

#include <optional>

using namespace mlir;

namespace lina::cuda {
namespace {

/// The operands a row-wise op reads row by row (its tiles of the result's
/// shape) and those it reads as gates or weights of rows.
struct RowOperands {
  llvm::SmallVector<Value, 2> rows, side;
};

std::optional<RowOperands> rowOperands(Operation *inner) {
  return llvm::TypeSwitch<Operation *, std::optional<RowOperands>>(inner)
      .Case<L2NormOp, ScaleOp, NegOp>(
          [](auto o) { return RowOperands{{o.getInput()}, {}}; })
      .Case<AddOp, SubOp>(
          [](auto o) { return RowOperands{{o.getLhs(), o.getRhs()}, {}}; })
      .Case([](ScaleRowsOp o) {
        return RowOperands{{o.getInput()}, {o.getWeights()}};
      })
      .Case([](DecayRowsOp o) {
        return RowOperands{{o.getInput()}, {o.getLogGates()}};
      })
      .Default([](Operation *) { return std::nullopt; });
}

bool sameShape(const TileShape &a, const TileShape &b) {
  return a.rows == b.rows && a.cols == b.cols;
}

/// Builds the plan in one walk over the kernel's ops. A pass stays open
/// while its values are read only by ops that can join it; the first op
/// that reads one and cannot join closes it, and the pass is placed just
/// before that op, after taking in the later row-wise ops that can already
/// run there (a decay of rows that waits on nothing but the pass, say).
class Planner {
public:
  Planner(const llvm::SetVector<Operation *> &ops,
          const llvm::DenseMap<Value, TileShape> &shapes)
      : ops(ops), shapes(shapes) {}

  RowPlan run(llvm::function_ref<bool(Operation *)> fetchable);

private:
  TileShape shape(Value v) const { return shapes.lookup(v); }
  /// The open pass that owns `v` (a member's result or a fetched load).
  std::optional<unsigned> openOwner(Value v) const {
    auto it = owner.find(v);
    if (it == owner.end() || !open[it->second])
      return std::nullopt;
    return it->second;
  }
  /// Whether `v` is in shared memory or a block argument by now.
  bool available(Value v) const {
    if (openOwner(v))
      return false;
    Operation *def = v.getDefiningOp();
    return !def || placed.contains(def);
  }
  bool canJoin(Operation *inner, unsigned pass) const;
  void join(Operation *inner, unsigned pass) {
    passes[pass].members.push_back(inner);
    owner[inner->getResult(0)] = pass;
  }
  unsigned openPass() {
    passes.emplace_back();
    open.push_back(true);
    return passes.size() - 1;
  }
  void close(unsigned pass, size_t next);
  void place(Operation *inner) {
    order.insert(inner);
    placed.insert(inner);
  }
  bool readOutside(Value v, const RowPass &pass) const {
    return llvm::any_of(v.getUsers(), [&](Operation *user) {
      return ops.contains(user) && !llvm::is_contained(pass.members, user);
    });
  }

  const llvm::SetVector<Operation *> &ops;
  const llvm::DenseMap<Value, TileShape> &shapes;
  std::vector<RowPass> passes;
  std::vector<bool> open;
  llvm::DenseMap<Value, unsigned> owner;
  llvm::DenseSet<Operation *> placed, absorbed;
  llvm::SetVector<Operation *> order;
};

/// `inner` may join open pass `pass` where the pass will be placed: it is
/// row-wise on the pass's shape, reads at least one of the pass's rows, and
/// everything else it reads is already in shared memory.
bool Planner::canJoin(Operation *inner, unsigned pass) const {
  std::optional<RowOperands> operands = rowOperands(inner);
  if (!operands)
    return false;
  Value first = passes[pass].members.empty()
                    ? passes[pass].fetched.front()->getResult(0)
                    : passes[pass].members.front()->getResult(0);
  if (!isRowWise(inner, shape(first)) ||
      !sameShape(shape(inner->getResult(0)), shape(first)))
    return false;
  bool readsPass = false;
  for (Value v : operands->rows) {
    if (openOwner(v) == pass)
      readsPass = true;
    else if (!available(v))
      return false;
  }
  return readsPass && llvm::all_of(operands->side,
                                   [&](Value v) { return available(v); });
}

/// Closes `pass` before the op at `next` (ops.size() at the end).
void Planner::close(unsigned pass, size_t next) {
  RowPass &p = passes[pass];
  // Later row-wise ops that need nothing computed after this point.
  for (size_t i = next + 1; i < ops.size(); ++i) {
    Operation *later = ops[i];
    if (!absorbed.contains(later) && canJoin(later, pass)) {
      join(later, pass);
      absorbed.insert(later);
    }
  }
  open[pass] = false;
  // A fetched load some other op reads is written to its tile by the pass,
  // from the rows it holds, where a member's rows then leave the kernel
  // from registers (k and mamba2's decayed k, which goes to the workspace:
  // no tile op of its own, no store of its tile; mamba2 1x8192x96x128
  // 0.760 -> 0.710 ms, docs/perf-notes.md). Otherwise the load is copied
  // to its tile after all: its rows would only wait in registers from the
  // top of the kernel. (rwkv7's d64 prepare kernel, whose k pass comes
  // late, spills 36 bytes under this rule and is still 3% faster.)
  bool leavesFromRegisters = llvm::any_of(p.members, [&](Operation *member) {
    return llvm::none_of(member->getResult(0).getUsers(),
                         [&](Operation *user) { return ops.contains(user); });
  });
  llvm::erase_if(p.fetched, [&](Operation *load) {
    if (!readOutside(load->getResult(0), p))
      return false;
    if (leavesFromRegisters) {
      p.toShared.insert(load->getResult(0));
      return false;
    }
    owner.erase(load->getResult(0));
    return true;
  });
  if (p.members.empty() || p.members.size() + p.fetched.size() < 2) {
    // Nothing to fuse: the op is printed as a call of its own.
    for (Operation *member : p.members)
      place(member);
    p = RowPass();
    return;
  }
  for (Operation *member : p.members) {
    place(member);
    Value result = member->getResult(0);
    if (readOutside(result, p))
      p.toShared.insert(result);
    for (Value operand : member->getOperands()) {
      auto it = owner.find(operand);
      bool ownRow = it != owner.end() && it->second == pass;
      if (!ownRow && !llvm::is_contained(p.reads, operand))
        p.reads.push_back(operand);
    }
  }
}

RowPlan Planner::run(llvm::function_ref<bool(Operation *)> fetchable) {
  for (size_t i = 0; i < ops.size(); ++i) {
    Operation *inner = ops[i];
    if (absorbed.contains(inner))
      continue;
    if (isa<LoadOp>(inner) && fetchable(inner) &&
        isRowWise(inner, shape(inner->getResult(0)))) {
      // Loads stay where they are; the pass reads the fetched rows.
      place(inner);
      unsigned pass = openPass();
      passes[pass].fetched.push_back(inner);
      owner[inner->getResult(0)] = pass;
      continue;
    }
    std::optional<RowOperands> operands = rowOperands(inner);
    // Gates and weights must be in shared memory before the op runs.
    if (operands)
      for (Value v : operands->side)
        if (std::optional<unsigned> pass = openOwner(v))
          close(*pass, i);
    llvm::SmallVector<unsigned, 2> readPasses;
    for (Value v : inner->getOperands())
      if (std::optional<unsigned> pass = openOwner(v))
        if (!llvm::is_contained(readPasses, *pass))
          readPasses.push_back(*pass);
    llvm::sort(readPasses);
    if (operands && isRowWise(inner, shape(inner->getResult(0)))) {
      if (readPasses.size() == 1 && canJoin(inner, readPasses.front())) {
        join(inner, readPasses.front());
        continue;
      }
      // (An op that reads two open passes closes both rather than merging
      // them: no preset has one.)
      for (unsigned pass : readPasses)
        close(pass, i);
      if (llvm::all_of(operands->rows, [&](Value v) { return available(v); }))
        join(inner, openPass());
      else
        place(inner);
      continue;
    }
    for (unsigned pass : readPasses)
      close(pass, i);
    place(inner);
  }
  for (unsigned pass = 0; pass < passes.size(); ++pass)
    if (open[pass])
      close(pass, ops.size());

  RowPlan plan;
  plan.order = std::move(order);
  for (RowPass &pass : passes) {
    if (pass.members.empty())
      continue;
    unsigned index = plan.passes.size();
    for (Operation *member : pass.members)
      plan.passOf[member] = index;
    for (Operation *load : pass.fetched)
      plan.passOf[load] = index;
    plan.passes.push_back(std::move(pass));
  }
  return plan;
}

} // namespace

bool isRowWise(Operation *inner, const TileShape &shape) {
  // A lane takes 1, 2, 4 or 8 columns: the device library's rows move them
  // as one word or whole 16-byte words (row<CC>::from_tile).
  int64_t perLane = shape.cols / 32;
  if (shape.packed || shape.cols % 32 != 0 ||
      !(perLane == 1 || perLane == 2 || perLane == 4 || perLane == 8))
    return false;
  if (isa<LoadOp>(inner))
    return true;
  std::optional<RowOperands> operands = rowOperands(inner);
  if (!operands)
    return false;
  if (auto rows = dyn_cast<ScaleRowsOp>(inner))
    if (cast<TileType>(rows.getWeights().getType()).getCols() != 1)
      return false;
  if (auto decay = dyn_cast<DecayRowsOp>(inner)) {
    int64_t gateCols = cast<TileType>(decay.getLogGates().getType()).getCols();
    if (gateCols != 1 && gateCols != shape.cols)
      return false;
  }
  return true;
}

const RowPass *RowPlan::passOfMember(Operation *inner) const {
  auto it = passOf.find(inner);
  if (it == passOf.end() || isa<LoadOp>(inner))
    return nullptr;
  return &passes[it->second];
}

bool RowPlan::isFetched(Operation *inner) const {
  auto it = passOf.find(inner);
  return it != passOf.end() && isa<LoadOp>(inner) &&
         llvm::is_contained(passes[it->second].fetched, inner);
}

RowPlan planRowPasses(const llvm::SetVector<Operation *> &ops,
                      const llvm::DenseMap<Value, TileShape> &shapes,
                      llvm::function_ref<bool(Operation *)> fetchable) {
  return Planner(ops, shapes).run(fetchable);
}

} // namespace lina::cuda
