//===- TileLayout.cpp - Shapes and shared-memory homes of tiles --------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "TileLayout.h"
#include "RegisterState.h"
#include "TileAccess.h"

#include "lina/Codegen/Passes.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <map>

using namespace mlir;

namespace lina::cuda {

bool computeShapes(Block &body, int64_t tileV,
                   llvm::DenseMap<Value, TileShape> &shapes,
                   std::string &error) {
  const bool partialSums = isa<ChunkedBackwardOp>(body.getParentOp());
  struct Flags {
    bool rows = false, cols = false;
  };
  auto flagsOf = [&](Value v) {
    const TileShape &t = shapes.lookup(v);
    return Flags{t.valueRows, t.valueColumns};
  };
  auto shapeOf = [&](Value v, Flags f) {
    auto t = cast<TileType>(v.getType());
    TileShape shape{f.rows ? tileV : t.getRows(), f.cols ? tileV : t.getCols(),
                    f.cols};
    shape.valueRows = f.rows;
    return shape;
  };
  // Value columns come from v, dL/do and the states; every op but the
  // products, the sums and the transposes keeps its first operand's.
  for (BlockArgument state : body.getArguments())
    shapes[state] = shapeOf(state, {false, true});
  for (Operation &inner : body.without_terminator()) {
    Flags result;
    bool ok = true, contracted = false;
    auto none = [&](Value v) {
      Flags f = flagsOf(v);
      return !f.rows && !f.cols;
    };
    auto same = [&](Value a, Value b) {
      Flags x = flagsOf(a), y = flagsOf(b);
      return x.rows == y.rows && x.cols == y.cols;
    };
    TypeSwitch<Operation *>(&inner)
        .Case([&](LoadOp o) { result.cols = o.getOperand() == ir::Operand::v; })
        .Case([&](LoadOutputGradOp) { result.cols = true; })
        .Case([&](TransposeOp o) {
          Flags in = flagsOf(o.getInput());
          result = {in.cols, in.rows};
        })
        .Case([&](MatmulOp o) {
          Flags lhs = flagsOf(o.getLhs()), rhs = flagsOf(o.getRhs());
          bool lhsInner = o.getTransposeLhs() ? lhs.rows : lhs.cols;
          ok = lhsInner == rhs.rows;
          contracted = lhsInner && rhs.rows;
          result = {o.getTransposeLhs() ? lhs.cols : lhs.rows, rhs.cols};
        })
        .Case([&](DecayProductOp o) {
          ok = none(o.getLhs()) && none(o.getRhs());
        })
        .Case([&](DecayProductGradOp o) { ok = none(o.getOther()); })
        .Case([&](L2NormOp o) { ok = none(o.getInput()); })
        .Case([&](L2NormGradOp o) {
          ok = none(o.getInput()) && none(o.getGrad());
        })
        .Case([&](TriSolveOp o) { result = flagsOf(o.getRhs()); })
        .Case([&](TriSolveTransposedOp o) { result = flagsOf(o.getRhs()); })
        .Case([&](DecayRowsOp o) {
          result = flagsOf(o.getInput());
          // Per-channel gates index the columns: key columns only.
          ok = !(result.cols &&
                 cast<TileType>(o.getLogGates().getType()).getCols() != 1);
        })
        .Case([&](DecayStateOp o) { result = flagsOf(o.getState()); })
        .Case<AddOp, SubOp, MulOp>([&](auto o) {
          result = flagsOf(o.getLhs());
          ok = same(o.getLhs(), o.getRhs());
        })
        .Case([&](RowSumOp o) {
          Flags in = flagsOf(o.getInput());
          contracted = in.cols;
          result = {in.rows, false};
        })
        .Case([&](RowDotOp o) {
          Flags in = flagsOf(o.getLhs());
          ok = same(o.getLhs(), o.getRhs());
          contracted = in.cols;
          result = {in.rows, false};
        })
        .Case([&](SumOp o) {
          // The first tile, added or (every term subtracted) not.
          Value first = o->getOperand(0);
          result = flagsOf(first);
          ok = llvm::all_of(o.getOperands(),
                            [&](Value v) { return same(v, first); });
        })
        .Case([&](ColSumOp o) {
          Flags in = flagsOf(o.getInput());
          contracted = in.rows;
          result = {false, in.cols};
        })
        .Case([&](AddToLastRowOp o) {
          result = flagsOf(o.getInput());
          ok = flagsOf(o.getRow()).cols == result.cols &&
               !flagsOf(o.getRow()).rows && !result.rows;
        })
        .Default([&](Operation *other) {
          if (other->getNumOperands() > 0)
            result = flagsOf(other->getOperand(0));
        });
    if (!ok || (contracted && !partialSums) || (result.rows && !partialSums)) {
      error = "'" + inner.getName().getStringRef().str() +
              "' would combine value columns across value tiles; this "
              "program cannot be split by tile-v";
      return false;
    }
    for (Value result_ : inner.getResults())
      shapes[result_] = shapeOf(result_, result);
  }
  return true;
}

llvm::SetVector<Operation *>
scheduleOps(Block &body, const llvm::DenseSet<Operation *> &ops,
            const llvm::SetVector<Operation *> &loadedHere) {
  auto isLoad = [&](Operation *inner) {
    return isa<LoadOp>(inner) || loadedHere.contains(inner);
  };
  // Loads read no tile, so they may all move to the top: the chunk's
  // global reads are then issued together and wait on memory once.
  std::vector<Operation *> order;
  for (Operation &inner : body)
    if (ops.contains(&inner) && isLoad(&inner))
      order.push_back(&inner);
  for (Operation &inner : body)
    if (ops.contains(&inner) && !isLoad(&inner))
      order.push_back(&inner);
  // Every other op sinks to just before its first reader (stores and the
  // yield stay in place). A tile then dies as soon as possible, and the
  // state's last reader is the op that decays it, which can then work in
  // place (see allocateShared).
  for (int i = (int)order.size() - 1; i >= 0; --i) {
    Operation *inner = order[i];
    if (isLoad(inner) || isa<StoreOp, YieldOp>(inner))
      continue;
    size_t firstUser = order.size();
    for (size_t j = i + 1; j < order.size(); ++j)
      if (llvm::is_contained(order[j]->getOperands(), inner->getResult(0)) &&
          !loadedHere.contains(order[j])) {
        firstUser = j;
        break;
      }
    if (firstUser == order.size())
      continue;
    order.erase(order.begin() + i);
    order.insert(order.begin() + firstUser - 1, inner);
  }
  return llvm::SetVector<Operation *>(order.begin(), order.end());
}

llvm::DenseMap<Operation *, int64_t>
groupIndependentOps(const llvm::SetVector<Operation *> &order, int64_t window,
                    const llvm::SetVector<Operation *> &loaded) {
  std::vector<Operation *> rest(order.begin(), order.end());
  llvm::DenseMap<Operation *, int64_t> interval;
  int64_t current = 0;
  // An operand is ready once its maker has an interval (or runs elsewhere:
  // a load before the kernel's ops, an argument).
  auto made = [&](Value v) {
    Operation *def = v.getDefiningOp();
    return !def || !order.contains(def) || interval.count(def);
  };
  auto madeHere = [&](Value v) {
    auto it = interval.find(v.getDefiningOp());
    return it != interval.end() && it->second == current;
  };
  auto operands = [&](Operation *op) {
    return op->getOperands().take_front(
        loaded.contains(op) ? 0 : op->getNumOperands());
  };
  while (!rest.empty()) {
    // The first op of the window that reads nothing of this interval's;
    // none: the next interval starts with the first op left, whose operands
    // (made before it in a topological order) are all made.
    size_t pick = 0;
    bool found = false;
    for (size_t i = 0; i < rest.size() && (int64_t)i < window; ++i) {
      Operation *op = rest[i];
      // The yield closes the chunk: nothing moves past it.
      if (isa<YieldOp>(op) && i > 0)
        break;
      if (llvm::all_of(operands(op), made) &&
          llvm::none_of(operands(op), madeHere)) {
        pick = i;
        found = true;
        break;
      }
    }
    if (!found && !interval.empty())
      ++current;
    interval[rest[pick]] = current;
    rest.erase(rest.begin() + pick);
  }
  return interval;
}

/// The interval `op` records, or -1.
static int64_t recordedInterval(Operation *op) {
  auto index = op->getAttrOfType<IntegerAttr>(kIntervalAttr);
  return index ? index.getInt() : -1;
}

llvm::SetVector<Operation *>
byRecordedInterval(const llvm::SetVector<Operation *> &order) {
  if (!llvm::all_of(order,
                    [](Operation *op) { return recordedInterval(op) >= 0; }))
    return order;
  std::vector<Operation *> sorted(order.begin(), order.end());
  llvm::stable_sort(sorted, [](Operation *a, Operation *b) {
    return recordedInterval(a) < recordedInterval(b);
  });
  return llvm::SetVector<Operation *>(sorted.begin(), sorted.end());
}

std::string intervalRefusal(const llvm::SetVector<Operation *> &order,
                            const llvm::SetVector<Operation *> &loaded) {
  auto name = [](Operation *op) {
    return "'" + op->getName().getStringRef().str() + "'";
  };
  bool any = llvm::any_of(
      order, [](Operation *op) { return recordedInterval(op) >= 0; });
  if (!any)
    return "";
  for (Operation *op : order) {
    int64_t at = recordedInterval(op);
    if (at < 0)
      return name(op) + " records no lina.interval, but other ops of the "
                        "gradients kernel do (run -lina-group-barriers to "
                        "plan them)";
    if (loaded.contains(op))
      continue;
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (def && order.contains(def) && recordedInterval(def) > at)
        return llvm::formatv("{0} records lina.interval {1}, before its "
                             "operand's maker {2} ({3}) (run "
                             "-lina-group-barriers to plan them)",
                             name(op), at, name(def), recordedInterval(def))
            .str();
    }
  }
  return "";
}

llvm::SetVector<Operation *> backwardSlice(Block &body,
                                           llvm::ArrayRef<Operation *> roots) {
  llvm::DenseSet<Operation *> needed(roots.begin(), roots.end());
  // Walk backwards once: an op is needed when a needed op reads its result.
  for (Operation &inner : llvm::reverse(body)) {
    if (!needed.contains(&inner))
      continue;
    for (Value operand : inner.getOperands())
      if (Operation *def = operand.getDefiningOp())
        needed.insert(def);
  }
  return scheduleOps(body, needed);
}

namespace {

/// First-fit allocation over a linear arena of floats, 16-byte aligned.
class Arena {
public:
  int64_t allocate(int64_t floats) {
    floats = (floats + 3) / 4 * 4;
    for (auto it = free.begin(); it != free.end(); ++it) {
      if (it->second < floats)
        continue;
      int64_t offset = it->first, size = it->second;
      free.erase(it);
      if (size > floats)
        free[offset + floats] = size - floats;
      return offset;
    }
    int64_t offset = end;
    end += floats;
    return offset;
  }
  void release(int64_t offset, int64_t floats) {
    floats = (floats + 3) / 4 * 4;
    free[offset] = floats;
    // Merge with neighbours so large tiles can reuse the space.
    auto it = free.find(offset);
    auto next = std::next(it);
    if (next != free.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free.erase(next);
    }
    if (it != free.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free.erase(it);
      }
    }
  }
  int64_t size() const { return end; }

private:
  std::map<int64_t, int64_t> free;
  int64_t end = 0;
};

} // namespace

/// Ops whose thread i reads element i of an operand only to write element i
/// of the result (and other tiles only whole or by row), so the result may
/// take that operand's buffer when the operand dies there. Returns the
/// candidates in order of preference.
static llvm::SmallVector<Value, 2> inPlaceCandidates(Operation *op) {
  return llvm::TypeSwitch<Operation *, llvm::SmallVector<Value, 2>>(op)
      .Case<AddOp, SubOp, MulOp>([](auto o) {
        return llvm::SmallVector<Value, 2>{o.getLhs(), o.getRhs()};
      })
      .Case(
          [](SumOp o) { return llvm::SmallVector<Value, 2>(o.getOperands()); })
      .Case<ScaleOp, NegOp, L2NormOp, GateOp, BetaOp>(
          [](auto o) { return llvm::SmallVector<Value, 2>{o.getInput()}; })
      .Case([](ScaleRowsOp o) {
        return llvm::SmallVector<Value, 2>{o.getInput()};
      })
      .Case([](DecayRowsOp o) {
        return llvm::SmallVector<Value, 2>{o.getInput()};
      })
      .Case([](DecayStateOp o) {
        return llvm::SmallVector<Value, 2>{o.getState()};
      })
      .Default([](Operation *) { return llvm::SmallVector<Value, 2>{}; });
}

SharedLayout allocateShared(Block &body,
                            const llvm::SetVector<Operation *> &ops,
                            const llvm::DenseMap<Value, TileShape> &shapes,
                            const llvm::SetVector<Operation *> &loadedHere,
                            const TileAccess &access,
                            const llvm::SetVector<Operation *> &pinned,
                            const llvm::DenseSet<Value> &inGlobal) {
  auto operandsRead = [&](Operation *inner) {
    return loadedHere.contains(inner) ? llvm::SmallVector<Value, 4>()
                                      : access.reads(inner);
  };
  llvm::DenseSet<Value> own;
  for (Operation *inner : pinned)
    for (Value result : inner->getResults())
      own.insert(result);
  auto inPlaceFor = [&](Operation *inner) {
    if (!access.mayWorkInPlace(inner))
      return llvm::SmallVector<Value, 2>{};
    if (access.registers)
      if (Value base = access.registers->epilogueBase(inner))
        return llvm::SmallVector<Value, 2>{base};
    return inPlaceCandidates(inner);
  };
  SharedLayout layout;
  // Offsets in `global` are shifted above the shared ones at the end.
  Arena shared, global;
  auto arenaOf = [&](Value v) -> Arena & {
    return inGlobal.contains(v) ? global : shared;
  };
  // Kernels without the state (the split strategy's prepare kernel) give its
  // buffer to the tiles, as do scans that keep it in registers. A
  // backward's two states (the chunk's starting state, loaded each chunk,
  // and the carried gradient) keep a buffer each.
  llvm::SmallDenseSet<int64_t, 2> stateOffsets;
  for (BlockArgument state : body.getArguments()) {
    bool stateUsed = llvm::any_of(ops, [&](Operation *inner) {
      return llvm::is_contained(operandsRead(inner), state);
    });
    if (!stateUsed)
      continue;
    layout.offset[state] = shared.allocate(shapes.lookup(state).floats());
    stateOffsets.insert(layout.offset[state]);
  }
  for (Operation *inner : pinned) // in order: the same text every time
    for (Value v : inner->getResults())
      if (shapes.count(v))
        layout.offset[v] = shared.allocate(shapes.lookup(v).floats());

  // The last op of this kernel that reads each value.
  llvm::DenseMap<Value, Operation *> lastUse;
  for (Operation *inner : ops)
    for (Value operand : operandsRead(inner))
      lastUse[operand] = inner;

  // A state's buffer is never returned to the arena: the yield copies the
  // new state into it, so no other tile may straddle it. It passes along a
  // chain of in-place ops instead; when the yielded value ends up in it, the
  // copy disappears.
  struct Freed {
    Arena *arena;
    int64_t offset, floats;
  };
  auto release = [&](std::vector<Freed> &list, Value v) {
    if (inGlobal.contains(v) ||
        (!stateOffsets.contains(layout.offset[v]) && !own.contains(v)))
      list.push_back(
          {&arenaOf(v), layout.offset[v], shapes.lookup(v).floats()});
  };

  // A buffer freed by one op is reused from the op after next: reusing it
  // at once would make the next op write what this one reads, a barrier
  // the two ops do not otherwise need.
  std::vector<Freed> freedByPrevious, freedByThis;
  for (Operation *inner : ops) {
    // An op done in another's call prints nothing, so it is no step of the
    // reuse delay below either.
    if (access.printsNothing(inner))
      continue;
    // Results first, so no result shares a buffer with an operand, except
    // an in-place op's result with the operand dying there.
    // (A product with an epilogue writes the epilogue's result.)
    llvm::SmallVector<Value, 2> written = access.writes(inner);
    llvm::SmallVector<Value, 2> candidates =
        loadedHere.contains(inner) || written.empty()
            ? llvm::SmallVector<Value, 2>{}
            : inPlaceFor(inner);
    // A state's buffer first: a result there that is yielded needs no copy.
    std::stable_partition(candidates.begin(), candidates.end(), [&](Value v) {
      auto it = layout.offset.find(v);
      return it != layout.offset.end() && stateOffsets.contains(it->second);
    });
    Value inPlace;
    for (Value candidate : candidates)
      if (lastUse.lookup(candidate) == inner &&
          shapes.lookup(candidate).floats() ==
              shapes.lookup(written.front()).floats() &&
          layout.offset.count(candidate) && !own.contains(candidate) &&
          inGlobal.contains(candidate) == inGlobal.contains(written.front())) {
        inPlace = candidate;
        break;
      }
    for (Value result : written)
      if (!own.contains(result))
        layout.offset[result] =
            inPlace ? layout.offset[inPlace]
                    : arenaOf(result).allocate(shapes.lookup(result).floats());
    for (const Freed &f : freedByPrevious)
      f.arena->release(f.offset, f.floats);
    freedByPrevious.clear();
    for (Value operand : operandsRead(inner))
      if (lastUse.lookup(operand) == inner && layout.offset.count(operand)) {
        if (operand != inPlace)
          release(freedByThis, operand);
        lastUse.erase(operand);
      }
    // A result nobody in this kernel reads is written, then forgotten.
    for (Value result : written)
      if (!lastUse.count(result))
        release(freedByThis, result);
    std::swap(freedByPrevious, freedByThis);
  }
  layout.sharedFloats = shared.size();
  for (Value v : inGlobal)
    if (auto it = layout.offset.find(v); it != layout.offset.end())
      it->second += layout.sharedFloats;
  layout.totalFloats = layout.sharedFloats + global.size();
  return layout;
}

llvm::DenseSet<Value>
chooseGlobalTiles(Block &body, const llvm::SetVector<Operation *> &ops,
                  const llvm::DenseMap<Value, TileShape> &shapes,
                  const TileAccess &access, int64_t budget, int64_t reserved) {
  // Each value's first and last step (the ops that print something) and
  // the calls that touch it, in the kernel's order.
  struct Life {
    int64_t first = -1, last = -1, touches = 0;
  };
  llvm::MapVector<Value, Life> lives;
  int64_t step = 0;
  for (Operation *inner : ops) {
    if (access.printsNothing(inner))
      continue;
    auto touch = [&](Value v) {
      // The states stay; so do packed tiles, which ldmatrix reads from
      // shared memory alone.
      auto shape = shapes.find(v);
      if (isa<BlockArgument>(v) || shape == shapes.end() ||
          shape->second.packed)
        return;
      Life &life = lives[v];
      if (life.first < 0)
        life.first = step;
      life.last = step;
      ++life.touches;
    };
    for (Value v : access.writes(inner))
      touch(v);
    for (Value v : access.reads(inner))
      touch(v);
    ++step;
  }
  llvm::DenseSet<Value> global;
  auto fits = [&] {
    return allocateShared(body, ops, shapes, {}, access, {}, global)
                   .sharedFloats +
               reserved <=
           budget;
  };
  // Chosen one at a time, each tile may have made an earlier choice
  // unneeded (a first-fit layout is not its peak): the most touched come
  // back first while the rest still fit.
  auto takeBackUnneeded = [&] {
    llvm::SmallVector<Value> chosen;
    for (auto &[v, life] : lives)
      if (global.contains(v))
        chosen.push_back(v);
    llvm::stable_sort(chosen, [&](Value a, Value b) {
      return lives.lookup(a).touches > lives.lookup(b).touches;
    });
    for (Value v : chosen) {
      global.erase(v);
      if (!fits())
        global.insert(v);
    }
    return global;
  };
  while (true) {
    SharedLayout layout =
        allocateShared(body, ops, shapes, {}, access, {}, global);
    if (layout.sharedFloats + reserved <= budget)
      return global.empty() ? global : takeBackUnneeded();
    // The step where the tiles left in shared memory take the most floats.
    std::vector<int64_t> live(step + 1, 0);
    for (auto &[v, life] : lives)
      if (!global.contains(v))
        for (int64_t i = life.first; i <= life.last; ++i)
          live[i] += shapes.lookup(v).floats();
    int64_t peak = std::max_element(live.begin(), live.end()) - live.begin();
    // Each call that touches a tile in global memory waits on it once, so
    // calls, not bytes, are the cost: where one tile covers the excess, the
    // one touched least (then the smaller); else the fewest calls per float
    // taken off the peak.
    const int64_t excess = layout.sharedFloats + reserved - budget;
    auto better = [&](Value v, Value than) {
      const Life &a = lives.lookup(v), &b = lives.lookup(than);
      int64_t fa = shapes.lookup(v).floats(), fb = shapes.lookup(than).floats();
      bool coversA = fa >= excess, coversB = fb >= excess;
      if (coversA != coversB)
        return coversA;
      if (coversA)
        return a.touches < b.touches || (a.touches == b.touches && fa < fb);
      return a.touches * fb < b.touches * fa;
    };
    Value pick;
    for (auto &[v, life] : lives)
      if (!global.contains(v) && life.first <= peak && peak <= life.last &&
          (!pick || better(v, pick)))
        pick = v;
    if (!pick) {
      // Only the block's arguments and packed tiles are live there: nothing
      // more can move.
      for (auto &[v, life] : lives)
        global.insert(v);
      return global;
    }
    global.insert(pick);
  }
}

} // namespace lina::cuda
