//===- SegmentCut.cpp - Whether a split chunk can run in segments ------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "SegmentCut.h"

#include "lina/Runtime/PtxasReport.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace mlir;

namespace lina::cuda {
namespace {

/// Whether `v` is computed from any of `roots`' results.
bool dependsOn(Value v, ArrayRef<Operation *> roots) {
  SmallVector<Value> work{v};
  llvm::DenseSet<Value> seen;
  while (!work.empty()) {
    Value at = work.pop_back_val();
    if (!seen.insert(at).second)
      continue;
    Operation *def = at.getDefiningOp();
    if (!def)
      continue;
    if (llvm::is_contained(roots, def))
      return true;
    for (Value operand : def->getOperands())
      work.push_back(operand);
  }
  return false;
}

/// The single user of `v`, or null.
Operation *onlyUser(Value v) {
  return v.hasOneUse() ? *v.getUsers().begin() : nullptr;
}

} // namespace

std::optional<SegmentCut> segmentCut(ChunkedOp op, const StateSplit &split,
                                     std::string &why) {
  Block &body = op.getBody().front();
  Value state = body.getArgument(0);
  DecayStateOp decay;
  MatmulOp product;
  for (Operation *user : state.getUsers()) {
    if (auto d = dyn_cast<DecayStateOp>(user); d && d.getState() == state &&
                                               !decay)
      decay = d;
    else if (auto m = dyn_cast<MatmulOp>(user);
             m && m.getRhs() == state && m.getLhs() != state &&
             !m.getTransposeLhs() && !product)
      product = m;
    else {
      why = "the state is used other than by one decay and one product "
            "into the output (segments need an additive rule with a decay)";
      return std::nullopt;
    }
  }
  if (!decay || !product) {
    why = decay ? "no product of the state reaches the output"
                : "the state has no decay (segments need an additive rule "
                  "with a decay)";
    return std::nullopt;
  }
  SmallVector<Operation *> stateUses{decay, product};
  // S' = decay + U, U independent of the state.
  auto yield = cast<YieldOp>(body.getTerminator());
  auto update = yield.getState().getDefiningOp<AddOp>();
  if (!update || onlyUser(decay.getResult()) != update.getOperation()) {
    why = "the next state is not the decayed state plus an update";
    return std::nullopt;
  }
  Value u = update.getLhs() == decay.getResult() ? update.getRhs()
                                                 : update.getLhs();
  if (dependsOn(u, stateUses)) {
    why = "the state's update depends on the state";
    return std::nullopt;
  }
  // o = X S [+ Y], only stored.
  Operation *sum = onlyUser(product.getResult());
  Operation *store = sum;
  if (auto add = dyn_cast_or_null<AddOp>(sum)) {
    Value y =
        add.getLhs() == product.getResult() ? add.getRhs() : add.getLhs();
    if (dependsOn(y, stateUses)) {
      why = "the output adds a second term that depends on the state";
      return std::nullopt;
    }
    store = onlyUser(add.getResult());
  }
  if (!isa_and_nonnull<StoreOp>(store)) {
    why = "the product with the state is not only stored as the output";
    return std::nullopt;
  }
  // X and the decay factors come from the workspace.
  Operation *x = product.getLhs().getDefiningOp();
  Operation *gates = decay.getLogGates().getDefiningOp();
  if (!x || !split.stored.contains(x) || !split.halfStored.contains(x)) {
    why = "the state's product reads a value the scan computes itself, not "
          "a tile stored for the tensor cores (segments need a bf16 or f16 spec)";
    return std::nullopt;
  }
  if (split.columns.lookup(x) !=
      cast<TileType>(product.getLhs().getType()).getCols()) {
    why = "the state's product reads a stored tile of other columns";
    return std::nullopt;
  }
  if (!gates || !split.lastRowOnly.contains(gates)) {
    why = "the scan does not load the chunk's decay factors";
    return std::nullopt;
  }
  SegmentCut cut;
  cut.queryOffset = split.offset.lookup(x);
  cut.factorOffset = split.offset.lookup(gates);
  cut.gateColumns =
      cast<TileType>(decay.getLogGates().getType()).getCols();
  return cut;
}

/// Segments.cuh's segment_carry_bytes, on the host (kCarryBuffers = 4);
/// the emitted kernel checks the two agree.
static int64_t carryBytes(int64_t C, int64_t K, int64_t V, int64_t GC) {
  auto ld = [](int64_t cols) {
    return cols < 8 || cols % 16 == 8 ? cols : cols + 8;
  };
  auto words = [](int64_t floats) { return (floats + 3) / 4 * 4; };
  int64_t buffer = words(C * ld(K) / 2) + words(C * ld(V) / 2) + words(GC);
  return 4 * (words(GC) + words(K * ld(V) / 2) + 4 * buffer);
}

unsigned printSegmentKernels(llvm::raw_ostream &os, const Spec &spec,
                             int64_t chunkSize, int64_t threads,
                             const SegmentCut &cut, int64_t recordFloats,
                             llvm::StringRef combine, llvm::StringRef carry) {
  int64_t K = spec.keyDim, V = spec.valueDim, GC = cut.gateColumns;
  // The combine kernel asks for one CTA an SM at least: with the bare thread
  // count, ptxas held it to 32 registers and spilled.
  std::string shape = llvm::formatv("{0}, {1}, {2}, {3}, {4}, {5}", chunkSize,
                                    K, V, GC, spec.valueHeads, recordFloats);
  os << llvm::formatv(
      "extern \"C\" __global__ void __launch_bounds__({0}, 1) {1}(lina::Params "
      "p, lina::SegmentParams s) {{\n"
      "  lina::segment_combine<{2}, {3}>(p, s);\n}\n"
      "LINA_KERNEL_ENTRY({1})\n\n",
      threads, combine, shape, cut.factorOffset);
  int64_t bytes = carryBytes(chunkSize, K, V, GC);
  // The runtime launches with the host's count: NVRTC checks it here.
  os << llvm::formatv("static_assert(lina::segment_carry_bytes({0}, {1}, {2}, "
                      "{3}) == {4}, \"the carry's shared memory\");\n",
                      chunkSize, K, V, GC, bytes);
  // The carry streams its chunks: three CTAs an SM (24 warps) keep more
  // copies in flight than two. Its ring of 64-token chunks (the wgmma
  // scan's) leaves shared memory for one: asking for three would only cap
  // its registers (it spilled). (Registers do not bind in this count:
  // ptxas fits them to the bound.)
  const int carryCTAs = std::max(
      1, std::min(3, cuda::ctasPerMultiprocessor(1, static_cast<int>(threads),
                                                 bytes)));
  os << llvm::formatv(
      "extern \"C\" __global__ void __launch_bounds__({0}, {6}) "
      "{1}(lina::Params "
      "p, lina::SegmentParams s) {{\n"
      "  LINA_DYNAMIC_SHARED(float, smem);\n"
      "  lina::segment_carry<{2}, {3}, {4}, lina::{5}>(p, s, smem);\n}\n"
      "LINA_KERNEL_ENTRY({1})\n\n",
      threads, carry, shape, cut.queryOffset, cut.factorOffset,
      spec.dtype == DType::F16 ? "f16" : "bf16", carryCTAs);
  return static_cast<unsigned>(bytes);
}

} // namespace lina::cuda
