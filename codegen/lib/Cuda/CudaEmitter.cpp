//===- CudaEmitter.cpp - A scheduled chunked program as CUDA C++ -------===//
//
// Part of lina. Prints the prelude (the device library) and one or two
// __global__ kernels whose bodies are calls into it, one per tile op, with a
// barrier between calls. Nothing from the spec reaches the source as text:
// only integers the verifier bounded, enum-selected names and finite floats.
//
//===----------------------------------------------------------------------===//
#include "lina/Codegen/CudaEmitter.h"
#include "lina/Codegen/Passes.h"
#include "lina/Dialect/Lina/IR/SpecConversion.h"
#include "lina/Runtime/KernelForms.h"

#include "Prelude.h"
#include "RegisterState.h"
#include "RowPass.h"
#include "ScheduleOf.h"
#include "SegmentCut.h"
#include "SmCapacity.h"
#include "StateSplit.h"
#include "TileAccess.h"
#include "TileLayout.h"
#include "WalkingKernelChoice.h"
#include "WarpgroupScan.h"
#include "WgmmaScan.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <optional>
#include <tuple>
#include <vector>

using namespace mlir;

namespace lina {
namespace {

/// The largest dynamic shared memory a CTA may ask for on sm_90 (227 KiB);
/// the runtime checks the actual device's limit at load.
constexpr int64_t kMaxSharedBytes = 232448;
/// The floats of it a backward's tiles may take, in whole 16-byte words,
/// before the rest go to global memory.
constexpr int64_t kSharedBudgetFloats = kMaxSharedBytes / 4 / 4 * 4;
/// The tile loads whose fetched words wait in registers at once in the
/// backward's kernels that defer their loads (KernelPrinter::defersLoads);
/// those that keep their element type go by cp.async and take none.
constexpr size_t kLoadsInFlight = 8;

/// The tiles of `sum` that are a product's second factor, bit k for tile k,
/// as the device function `sum` takes them; nullopt where one lies past
/// the 64th tile (emitCudaBackward refuses such a sum).
std::optional<uint64_t> secondFactorMask(SumOp sum) {
  uint64_t second = 0;
  int64_t tile = 0;
  for (const SumOp::Term &term : sum.getTerms()) {
    tile += term.rhs ? 2 : 1;
    if (!term.rhs)
      continue;
    if (tile > 64)
      return std::nullopt;
    second |= uint64_t(1) << (tile - 1);
  }
  return second;
}

/// A backward's lina.accumulate ops: the roots of its gradients kernel.
SmallVector<Operation *> accumulates(Block &body) {
  SmallVector<Operation *> ops;
  for (AccumulateOp accumulate : body.getOps<AccumulateOp>())
    ops.push_back(accumulate);
  return ops;
}

std::string floatLiteral(double v) {
  return llvm::formatv("{0:e9}f", v).str();
}

/// The prelude's element type: its bf16/f16 structs, or float.
const char *elementType(DType d) {
  return d == DType::F32 ? "float" : toString(d);
}

/// A tile's floats [begin, end) in shared memory, and the value whose tile
/// it is (null for the scratch region).
struct Span {
  int64_t begin, end;
  Value value = {};
  /// Ordered by a __syncwarp since it was accessed (KernelPrinter::
  /// warpBarrier).
  bool warpOrdered = false;
};

/// The barrier an access needs: none, __syncwarp or __syncthreads.
enum class Order { None, Warp, CTA };

class KernelPrinter {
public:
  /// `op` is a lina.chunked, or a lina.chunked_backward (Kind::Backward).
  KernelPrinter(Operation *op, int64_t chunkSize, const Spec &spec,
                int64_t tileV,
                const llvm::DenseMap<Value, cuda::TileShape> &shapes,
                llvm::raw_ostream &os)
      : op(op), spec(spec), tileV(tileV), shapes(shapes), os(os),
        c(chunkSize), mma(spec.dtype != DType::F32) {}
  KernelPrinter(ChunkedOp op, const Spec &spec, int64_t tileV,
                const llvm::DenseMap<Value, cuda::TileShape> &shapes,
                llvm::raw_ostream &os)
      : KernelPrinter(op, op.getChunkSize(), spec, tileV, shapes, os) {}

  /// What a kernel does besides running its ops on each chunk.
  enum class Kind {
    Fused,             ///< walks the chunks with the state on chip
    MaterializeScan,   ///< ... and writes each chunk's starting state
    MaterializeOutput, ///< one chunk per CTA, from its written state
    Prepare,           ///< one chunk per CTA, no state; writes `split` values
    SplitScan,         ///< walks the chunks, loading `split` values
    /// A chunked backward's reverse scan: walks the chunks from the last
    /// with the state's gradient on chip, running only the ops its update
    /// needs, and writes the gradient each chunk starts from (dL/d of the
    /// chunk's last state) to the workspace.
    BackwardStateGrads,
    /// A chunked backward's gradients: one chunk per CTA (a grid-stride
    /// walk over the chunks where spilled tiles bound the CTAs), from the
    /// chunk's starting state and state gradient in the workspace; adds
    /// the chunk's gradients to the fp32 outputs.
    Backward,
  };
  static bool isBackward(Kind kind) {
    return kind == Kind::BackwardStateGrads || kind == Kind::Backward;
  }
  /// Prints one kernel running `ops` per chunk, and its entry for the
  /// emulated device (LINA_KERNEL_ENTRY). Returns its shared bytes.
  int64_t print(const std::string &name,
                const llvm::SetVector<Operation *> &ops, Kind kind,
                int64_t threads, const cuda::StateSplit *split = nullptr) {
    int64_t bytes = printKernel(name, ops, kind, threads, split);
    if (!asDeviceFunction)
      os << "LINA_KERNEL_ENTRY(" << name << ")\n\n";
    return bytes;
  }
  int64_t printKernel(const std::string &name,
                      const llvm::SetVector<Operation *> &ops, Kind kind,
                      int64_t threads, const cuda::StateSplit *split);
  /// The kernel that walks the chunks fetches the next chunks' tiles while
  /// it computes this one, into rings of this many buffers (1 to 3; the
  /// placement's `ring`, lina-pipeline-loads' record); 0 loads each
  /// chunk's tiles when the chunk reaches them.
  int64_t fetchRing = 0;
  /// Choose the walking kernel's ring and CTAs an SM instead of reading
  /// them from the placement (lina-pipeline-loads and lina-occupancy,
  /// through chooseWalkingKernel): fetch ahead where `prefetch` (the
  /// schedule's) says, in the ring that costs no occupancy that matters;
  /// the choices are left in chosenRing and chosenMinCTAs.
  bool choosePlacement = false, prefetch = false;
  int64_t chosenRing = 0;
  /// The CTAs an SM the kernel that walks the chunks asks ptxas to fit (its
  /// __launch_bounds__ minimum; 0 asks for none): the placement's
  /// `min_ctas`, lina-occupancy's record.
  int64_t minCTAs = 0, chosenMinCTAs = 0;
  /// The same for a chunk-parallel kernel (the split strategy's prepare
  /// kernel, the materialize strategy's output kernel): the placement's
  /// `parallel_min_ctas`, lina-occupancy's record; and whether this printer
  /// printed one (its minimum then in chosenParallelMinCTAs).
  int64_t parallelMinCTAs = 0, chosenParallelMinCTAs = 0;
  /// Print the kernel as a device function of its CTA's index `block`
  /// instead (the backward's two scans share one launch,
  /// emitCudaBackward); `printedMinCTAs` is the minimum its
  /// __launch_bounds__ would have asked for.
  bool asDeviceFunction = false;
  int64_t printedMinCTAs = 0;
  bool printedParallel = false;
  /// Kernels that walk the chunks keep the state in registers: what
  /// lina-place-state recorded (`placement <state = registers>`).
  bool stateInRegisters = false;
  /// A prepare kernel runs rows of its inputs through registers as
  /// lina-row-passes records (the split strategy's); a backward's prepare
  /// kernels run tile by tile, as no pass plans their row passes.
  bool rowPasses = true;
  /// The kernel's tile loads are in flight together (defersLoads): the
  /// backward's prepare kernels, which load their chunk tile by tile.
  bool loadsTogether = false;
  /// The prepare kernel plans its row passes and leaves them in
  /// chosenRowPasses (lina-row-passes, through chooseRowPasses) instead of
  /// checking them against the ops' `lina.row_pass`.
  bool chooseRows = false;
  /// A backward's kernel picks the tiles it keeps in global memory and
  /// leaves them in chosenGlobal (lina-global-tiles, through
  /// chooseBackwardGlobalTiles) instead of reading the ops' `lina.in_global`.
  bool chooseGlobal = false;
  /// The gradients kernel picks the chunk states and (where `packLoads`)
  /// loaded tiles it keeps packed and leaves them in chosenPackedStates and
  /// chosenPackedLoads (lina-pack-states, through choosePackedTiles)
  /// instead of reading the op's `lina.packed_states` and its ops'
  /// `lina.packed`.
  bool choosePacked = false, packLoads = true;
  llvm::SmallVector<int64_t, 2> chosenPackedStates;
  llvm::SmallVector<Operation *> chosenPackedLoads;
  llvm::DenseSet<Operation *> chosenGlobal;
  llvm::DenseMap<Operation *, int64_t> chosenRowPasses;
  /// Empty where every op records the row pass the prepare kernel running
  /// `ops` does it in (`lina.row_pass`, none for an op in no pass), else
  /// the first disagreement: the kernel is printed as recorded or not at
  /// all.
  std::string rowPassRefusal() {
    for (Operation &inner : body()) {
      auto recorded = inner.getAttrOfType<IntegerAttr>(kRowPassAttr);
      std::optional<int64_t> planned;
      if (auto it = rows->passOf.find(&inner); it != rows->passOf.end())
        planned = it->second;
      std::optional<int64_t> got;
      if (recorded)
        got = recorded.getInt();
      if (got == planned)
        continue;
      auto text = [](std::optional<int64_t> pass) {
        return pass ? "row pass " + std::to_string(*pass) : "no row pass";
      };
      return llvm::formatv("'{0}' records {1}, but the prepare kernel runs "
                           "it in {2} (run -lina-row-passes to plan them)",
                           inner.getName().getStringRef(), text(got),
                           text(planned))
          .str();
    }
    return "";
  }
  /// Why the kernel printed last cannot be what the IR records (a record
  /// lina-place-state would not have made); empty when it can.
  std::string refusal;
  /// Empty where every op of the chunk records the part `registers` gives
  /// it in the kernel running `ops` (`lina.state_use`, none off `ops`),
  /// else the first disagreement: the kernel is printed as recorded or
  /// not at all.
  std::string stateUseRefusal(const llvm::SetVector<Operation *> &ops) {
    for (Operation &inner : body()) {
      auto recorded = inner.getAttrOfType<StringAttr>(kStateUseAttr);
      StringRef planned =
          ops.contains(&inner) ? cuda::stateUse(*registers, &inner) : "";
      StringRef got = recorded ? recorded.getValue() : "";
      if (got != planned)
        return llvm::formatv("'{0}' records lina.state_use = \"{1}\", but "
                             "in this kernel it plays \"{2}\" (run "
                             "-lina-place-state to place the state)",
                             inner.getName().getStringRef(), got, planned)
            .str();
    }
    return "";
  }
  /// Per-channel decay products factor through each channel's midpoint on
  /// the tensor cores where the chunk's gates allow (unless the schedule
  /// says `direct_decay`; Prelude.cuh's factored_decay_product).
  bool mmaDecay = false;
  /// The backward's chunk states and their gradients are kept in bf16 in
  /// global memory (emitCudaBackward sets it where the plan's
  /// chunkStateBytes says so, for bf16 specs): the products that read them
  /// round them to bf16 anyway, and the workspace halves.
  bool bf16ChunkStates = false;
  /// `base` (p.chunk_states or d.chunk_grads) as the element type they
  /// are kept in.
  std::string chunkStates(const char *base) const {
    return bf16ChunkStates ? std::string("(bf16 *)") + base : base;
  }
  /// Kernels that walk the chunks ask for two CTAs an SM where their shared
  /// memory allows two (the schedule's `two_ctas`).
  bool twoCTAs = false;

private:
  Block &body() { return op->getRegion(0).front(); }
  /// The state the yield replaces: the forward's state, the backward's
  /// gradient of it (its second argument).
  Value carried() { return body().getArguments().back(); }
  std::string buf(Value v) {
    // A tile in a buffer ring is in this chunk's copy.
    std::string at = address(layout.offset.lookup(v),
                             doubled.contains(v) ? " + ring" : "");
    return shape(v).packed ? std::string("((") + mmaType() + " *)" + at + ")"
                           : at;
  }
  /// A backward kernel's name in `lina.in_global` records.
  const char *kernelRole() const {
    return kind == Kind::BackwardStateGrads ? "scan" : "chunks";
  }
  /// Whether `inner`'s `lina.in_global` names this backward kernel.
  bool recordsInGlobal(Operation *inner) const {
    auto kernels = inner->getAttrOfType<ArrayAttr>(kInGlobalAttr);
    return kernels && llvm::any_of(kernels, [&](Attribute a) {
             auto name = dyn_cast<StringAttr>(a);
             return name && name.getValue() == kernelRole();
           });
  }
  /// The CTA's index in the grid of its kernel.
  const char *blockIndex() const {
    return asDeviceFunction ? "block" : "blockIdx.x";
  }
  /// The floats at `offset` of the layout: in shared memory, or past
  /// sharedFloats in the CTA's spill region of global memory.
  std::string address(int64_t offset, const char *plus = "") {
    if (spillFloats > 0 && offset >= sharedFloats)
      return "(spill + " + std::to_string(offset - sharedFloats) + plus + ")";
    return "(smem + " + std::to_string(offset) + plus + ")";
  }
  /// Whether `v`'s tile is in shared memory rather than the spill region
  /// (address's test): only there can cp.async write it.
  bool inSharedMemory(Value v) {
    return spillFloats == 0 || layout.offset.lookup(v) < sharedFloats;
  }
  /// A backward whose tiles do not fit in shared memory keeps those past
  /// the first sharedFloats in global memory, the tiles layOut chose
  /// (chooseGlobalTiles): the device library's tile calls take generic
  /// pointers, and the backward reads no tile with ldmatrix or cp.async (it
  /// packs none).
  void spillPastSharedMemory();
  const cuda::TileShape &shape(Value v) {
    return kernelShapes.find(v)->second;
  }
  int64_t gateCols(Value v) { return shape(v).cols; }
  /// One global-to-shared tile copy: load_tile<rows, cols, type>(dst, src,
  /// stride, n).
  struct TileLoad {
    int64_t rows, cols;
    std::string type, dst, src;
    int64_t stride;
    /// src and stride are whole 16-byte words (lina's workspace).
    bool aligned = false;
    /// The rows to copy: the chunk's, or one (a stored last row).
    std::string validRows = "n";
    /// An input's src as its tensor and the chunk's element offset in it
    /// (empty for the workspace): a scan's prefetch walks the offset.
    std::string base, offset;
  };
  /// Where decay_state finds the chunk's last row of gate sums `g`: row
  /// n - 1 of the tile, or the tile itself when it holds only that row.
  std::string lastGateRow(Value g) {
    if (shape(g).rows == 1)
      return buf(g);
    return llvm::formatv("({0} + (n - 1) * {1})", buf(g),
                         cuda::rowStride(shape(g).cols));
  }
  void printOp(Operation *inner);
  /// Whether this split scan loads the decay factors of `gates` (the
  /// prepare kernel stores exp of the last row, store_decay_factors)
  /// rather than the gate sums.
  bool factorsStored(Value gates) {
    Operation *def = gates.getDefiningOp();
    return loadsStored() && def && split->lastRowOnly.contains(def);
  }
  /// The tile copy `inner` makes in this kernel: a spec input or (split scan)
  /// a stored value; nullopt for every other op, and for a fixed per-head
  /// gate (filled, not loaded).
  std::optional<TileLoad> tileLoad(Operation *inner);
  std::optional<TileLoad> inputLoad(LoadOp load);
  /// A backward's accumulate: the tile added to its gradient buffer.
  void printAccumulate(AccumulateOp o);
  /// The first float of this chunk's workspace record for this value head.
  std::string recordAddress();
  /// The element type of tiles a split scan stores for the tensor cores:
  /// Prelude.cuh's mma_t, f16 for an f16 spec and bf16 otherwise.
  const char *mmaType() const {
    return spec.dtype == DType::F16 ? "f16" : "bf16";
  }
  /// `record`: the chunk's workspace record (floats), by default computed
  /// from its slot; a scan's prefetch passes its running cursor instead.
  std::string workspaceAddress(Operation *stored,
                               const std::string &record = "");
  void printTileLoad(Operation *inner, const TileLoad &load);
  /// The device library's two ways to move `load`'s tile, as printed
  /// calls: a cp.async copy of it from `src` into `dst` (tile_copy), and
  /// the fetch from `src` into the registers of the tile_fetch `fetcher`.
  std::string copyCall(const TileLoad &load, const std::string &dst,
                       const std::string &src) const {
    return llvm::formatv("    tile_copy<{0}, {1}, {2}>::fetch{3}({4}, {5}, "
                         "{6}LL, {7});\n",
                         load.rows, load.cols, load.type,
                         load.aligned ? "<true>" : "", dst, src, load.stride,
                         load.validRows);
  }
  std::string fetchCall(const std::string &fetcher, const TileLoad &load,
                        const std::string &src) const {
    return llvm::formatv("    {0}.fetch{1}({2}, {3}LL, {4});\n", fetcher,
                         load.aligned ? "<true>" : "", src, load.stride,
                         load.validRows);
  }
  /// The gradients kernel and the backward's prepare kernels defer their
  /// tile loads' stores: each load's fetch (global to registers) is
  /// printed where its op is and its commit (registers to shared memory)
  /// waits in pendingCommits until the next op that is not a tile load, or
  /// a barrier (landLoads); a tile that keeps its element type in shared
  /// memory goes by cp.async instead, with the chunk states
  /// (`copiesPending`). A chunk's loads (its inputs, its record's tiles,
  /// its states) are then all in flight before the first lands, where
  /// each was a round trip to global memory of its own. No tile load reads
  /// shared memory, and every other op runs after the commits, so only the
  /// loads' order among themselves changes.
  bool defersLoads() const { return kind == Kind::Backward || loadsTogether; }
  void landLoads();
  std::vector<std::string> pendingCommits;
  bool copiesPending = false;
  int64_t fetchesPrinted = 0;
  /// Prefetch: the tile_fetch registers, the lambda that fetches the chunk
  /// starting at a given t0 into the copy at a given offset, and the first
  /// chunks' fetches, printed before the chunk loop.
  void printPrefetchSetup();
  /// Prefetch, at the top of each chunk: the tiles land in this chunk's
  /// buffers, a barrier, and the fetch of the chunk buffers - 1 ahead (the
  /// next one with single buffers) starts.
  void printPrefetchLanding();
  /// Whether the kernel walks the chunks from the last to the first (the
  /// backward's reverse scan).
  bool walksBack() const { return kind == Kind::BackwardStateGrads; }
  /// The shared-memory layout of the ops in `order` (the `fetched` tiles
  /// pinned), with the scratch region; single buffers.
  void layOut(const llvm::SetVector<Operation *> &order);
  /// The floats of the layout with a ring of `ring` buffers for each
  /// fetched tile (1: single buffers): the other copies lie above
  /// everything else, so only the total grows.
  int64_t ringFloats(int64_t ring);
  /// The floats between a tile's copies: the single layout, in 16-byte
  /// words (cp.async writes whole words).
  int64_t ringStride() const { return (singleFloats + 3) / 4 * 4; }
  /// The ring the fetched tiles get where it is chosen (choosePlacement).
  int64_t ringDepth(int64_t threads);
  /// Gives the fetched tiles rings of `ring` buffers (1: single buffers).
  void useRing(int64_t ring);
  /// Whether a fetched tile keeps its global element type, so that in a
  /// ring it goes by cp.async straight to shared memory (tile_copy).
  bool copyable(Operation *fetched);
  /// Whether it does here: copyable, and the tiles are in rings (single
  /// buffers take every tile through registers, tile_fetch).
  bool copiedAsync(Operation *fetched) {
    return !doubled.empty() && copyable(fetched);
  }
  /// Marks in kernelShapes the tiles this kernel keeps packed: loaded bf16
  /// tiles that only tensor-core products read.
  void choosePackedTiles(const llvm::SetVector<Operation *> &ops);
  /// The gradients kernel's: its chunk states and its loaded tiles.
  void choosePackedStates(const llvm::SetVector<Operation *> &ops);
  void choosePackedLoads(const llvm::SetVector<Operation *> &ops);
  /// Whether `inner` loads a tile of the mma's 16-bit operand type, of
  /// whole 16-byte rows (ldmatrix's), that only tensor-core products among
  /// `ops` read: one a kernel may keep packed.
  bool loadsForProductsAlone(Operation *inner,
                             const llvm::SetVector<Operation *> &ops);
  bool readsAsMmaOperand(Operation *reader, Value v);
  void barrierIfNeeded(Operation *inner);
  void productBarriers(Operation *product);
  void barrierIfNeeded(std::vector<Span> reads, std::vector<Span> writes);
  Span range(Value v) {
    int64_t begin = layout.offset.lookup(v);
    return {begin, begin + shape(v).floats(), v};
  }
  void barrier() {
    landLoads();
    os << "    __syncthreads();\n";
    hazards = {};
    columnsTaken = 0;
  }
  /// The CTA's threads (printKernel's), and the columns that ops giving a
  /// thread a column (the triangular solves) took since the last barrier:
  /// in the gradients kernel, the next such op starts at the thread after
  /// them (firstThread), so two narrow solves between the same barriers run
  /// side by side. Every reader of a solve waits at a CTA barrier there, so
  /// which thread solves a column is free.
  int64_t threads = 0, columnsTaken = 0;
  std::string firstThread(int64_t columns) {
    if (kind != Kind::Backward || threads <= 0)
      return "";
    int64_t first = columnsTaken % threads;
    columnsTaken += columns;
    return first == 0 ? "" : ", " + std::to_string(first);
  }
  /// Orders a warp's own accesses (ownColumns): what every warp did so far
  /// is ordered for the tiles it owns, and only a different tile over the
  /// same floats needs the CTA's barrier.
  void warpBarrier() {
    landLoads();
    os << "    __syncwarp();\n";
    for (Span &s : hazards.reads)
      s.warpOrdered = true;
    for (Span &s : hazards.writes)
      s.warpOrdered = true;
  }
  /// Whether every op of a scan's chunk keeps to the value columns of the
  /// warp that runs it (RegisterState::ownColumns), so that ops order
  /// against each other with __syncwarp, and only the landing of the
  /// fetched tiles takes the CTA's barrier: tiles written in the chunk are
  /// state products' results, each warp writing its own columns; every
  /// tile a warp reads whole (X of X S, A of a fused A B, Y of an update,
  /// the gates) is fetched.
  bool keepsToOwnColumns(const llvm::SetVector<Operation *> &ops);
  /// The state's register plan, or null when this kernel keeps the state
  /// in shared memory.
  const cuda::RegisterState *plan() const {
    return registers ? &*registers : nullptr;
  }
  /// What each op reads and writes in shared memory under this kernel's
  /// plans.
  cuda::TileAccess access() const {
    return {plan(), rows ? &*rows : nullptr, &storedDirect,
            &foldedTransposes};
  }
  /// Marks in foldedTransposes the transposes of `ops` that only feed
  /// matmuls as their right operand, of a tile computed here (a loaded
  /// tile may be packed, and packed tiles are read untransposed).
  void foldTransposes(const llvm::SetVector<Operation *> &ops);
  /// The folded transpose `matmul`'s right operand comes from, or null.
  Operation *foldedRhs(MatmulOp matmul) {
    Operation *def = matmul.getRhs().getDefiningOp();
    return def && foldedTransposes.contains(def) ? def : nullptr;
  }
  /// This kernel loads the values a prepare kernel stored (`split`'s): the
  /// split strategy's scan, and a backward's two scans and its gradients
  /// kernel.
  bool loadsStored() const {
    return split && (kind == Kind::SplitScan || kind == Kind::MaterializeScan ||
                     isBackward(kind));
  }
  /// The tiles `inner` reads in this kernel: none for a value the scan
  /// loads from the workspace (its operands stay in the prepare kernel).
  llvm::SmallVector<Value, 4> tileReads(Operation *inner) {
    if (loadsStored() && split->stored.contains(inner))
      return {};
    return access().reads(inner);
  }
  /// The backward's reverse scan (Kind::BackwardStateGrads), after print's
  /// prologue; `stateAt` gives a state tile's offset in [rows, HV, K, V]
  /// for a row expression.
  void printBackwardScan(
      const llvm::SetVector<Operation *> &ops,
      llvm::function_ref<std::string(const std::string &)> stateAt);
  /// The backward's chunk-parallel gradients (Kind::Backward), likewise.
  void printBackwardChunks(
      const llvm::SetVector<Operation *> &ops,
      llvm::function_ref<std::string(const std::string &)> stateAt);
  /// Prints a row pass (RowPass.h) in place of its last member.
  void printRowPass(const cuda::RowPass &pass);
  /// The row_fetch a fetched load's rows wait in.
  std::string fetchedRows(Operation *load) {
    return "rows" + std::to_string(rowFetchIndex.lookup(load));
  }
  /// Whether `v` lives in the state's registers.
  bool inRegisters(Value v) {
    return registers && !registers->inSharedMemory(v);
  }
  /// Prints an op on the register-resident state; false for other ops. (The
  /// yield prints nothing: printOp returns before, the state being updated
  /// in place.)
  bool printRegisterStateOp(Operation *inner);
  /// The scratch of the state products' partial sums: none where no warp
  /// splits the key columns.
  std::string stateScratch() {
    return registers->scratchFloats > 0 ? scratch() : "nullptr";
  }
  std::string scratch() {
    return scratchOffset < 0 ? "nullptr" : address(scratchOffset);
  }
  /// The matmul that sums the hoisted product `product`'s partials into
  /// its result, which is also the product's (reducedBy, when the allocator
  /// put T + X S in T's tile); null when the product reduces them itself.
  Operation *partialsReducer(Operation *product) {
    if (!registers)
      return nullptr;
    Operation *matmul = registers->reducedBy.lookup(product);
    if (!matmul)
      return nullptr;
    // Writing the output itself, the matmul's sum has no tile at all.
    if (storedDirect.contains(matmul))
      return matmul;
    if (buf(matmul->getResult(0)) !=
        buf(registers->epilogue.lookup(product)->getResult(0)))
      return nullptr;
    return matmul;
  }
  /// The hoisted product whose partials the matmul `inner` sums, or null.
  Operation *reducedProduct(Operation *inner) {
    if (!registers || !isa<MatmulOp>(inner))
      return nullptr;
    Operation *product = registers->reduces.lookup(inner);
    return product && partialsReducer(product) ? product : nullptr;
  }
  /// The scratch region a hoisted product's partials wait in.
  std::string secondScratch() {
    return "(smem + " +
           std::to_string(scratchOffset + registers->scratchRegionFloats) +
           ")";
  }
  /// Floats of scratch a factored per-channel decay product needs (its two
  /// scaled tiles, packed: two bf16s a float); 0 when `inner` is not one.
  int64_t decayScratchFloats(Operation *inner) {
    // A backward's decay product gradient with one gate column puts the
    // masked dP . E there before its product.
    if (auto grad = dyn_cast<DecayProductGradOp>(inner))
      return gateCols(grad.getLhsGates()) == 1
                 ? shape(grad.getGrad()).rows *
                       cuda::rowStride(shape(grad.getGrad()).cols)
                 : 0;
    auto product = dyn_cast<DecayProductOp>(inner);
    // A scan loads a stored product: it computes nothing.
    if (loadsStored() && split->stored.contains(inner))
      return 0;
    if (!product || !mmaDecay || !mma || gateCols(product.getLhsGates()) == 1)
      return 0;
    return shape(product.getResult()).rows *
           cuda::rowStride(shape(product.getLhs()).cols);
  }
  /// Ops that use the kernel's scratch region inside one call.
  bool usesScratch(Operation *inner) {
    return (registers && registers->products.contains(inner) &&
            registers->scratchFloats > 0) ||
           decayScratchFloats(inner) > 0 || reducedProduct(inner);
  }

  Operation *op;
  const Spec &spec;
  int64_t tileV;
  const llvm::DenseMap<Value, cuda::TileShape> &shapes;
  /// `shapes` with this kernel's packed tiles marked.
  llvm::DenseMap<Value, cuda::TileShape> kernelShapes;
  llvm::raw_ostream &os;
  int64_t c;
  bool mma;
  cuda::SharedLayout layout;
  std::optional<cuda::RegisterState> registers;
  /// A prepare kernel's row passes.
  std::optional<cuda::RowPlan> rows;
  llvm::DenseMap<Operation *, int> rowFetchIndex;
  /// A prepare kernel's stored values that no op of it reads and whose call
  /// can write them to the workspace itself (tri_solve_to_global); a scan's
  /// output that a product's epilogue can write itself, with its store
  /// (directOutputs).
  llvm::DenseSet<Operation *> storedDirect;
  llvm::DenseSet<Operation *> foldedTransposes;
  /// Marks in storedDirect a scan's outputs that the call making them writes
  /// to global memory (outputProducer), and their stores.
  void directOutputs(const llvm::SetVector<Operation *> &ops);
  /// The op whose call can write `store`'s value to the output itself: a
  /// register-state product whose reduction pass applies the epilogue that
  /// makes the value, or the matmul that reduces a hoisted product's
  /// partials into it; null for any other value, or one read elsewhere.
  Operation *outputProducer(StoreOp store);
  /// The output tile of this chunk and value tile, as a global_rows.
  std::string outputRows();
  /// Where the state products' partial sums and the factored decay
  /// products' scaled tiles go (used inside single calls, except a hoisted
  /// product's partials, which wait in a second region from the call that
  /// makes them to the one that sums them); -1 when no op needs it.
  int64_t scratchOffset = -1, scratchFloats = 0;
  const cuda::StateSplit *split = nullptr;
  Kind kind = Kind::Fused;
  /// With prefetch (kernels that walk the chunks), the ops whose tiles are
  /// fetched ahead, in order, into buffers of their own (allocateShared's
  /// `pinned`). Where shared memory allows, each tile has a ring of
  /// `buffers` copies (`doubled` holds the values), `copyStride` floats
  /// apart; the kernel's `ring` is the offset of this chunk's copy, and the
  /// copies of the next one or two chunks (buffers - 1) land while this
  /// chunk's ops run. Otherwise the tiles wait in registers until the top
  /// of their chunk, and each chunk ends with a barrier.
  llvm::SetVector<Operation *> fetched;
  llvm::DenseSet<Value> doubled;
  int64_t copyStride = 0, buffers = 1;
  /// The single-buffered layout's floats (layOut), which the rings extend.
  int64_t singleFloats = 0;
public:
  /// Floats of the layout in shared memory, and past them in the CTA's
  /// spill region (spillPastSharedMemory; backward only, else 0).
  int64_t sharedFloats = 0, spillFloats = 0;
private:
  /// The chunk's ops keep to their warps' value columns
  /// (keepsToOwnColumns).
  bool ownColumns = false;
  /// Shared-memory ranges read and written since the last barrier.
  struct {
    std::vector<Span> reads, writes;
  } hazards;
};

/// The worst ordering `s` needs after the accesses in `done`: none, a
/// warp's (the same tile, with ownColumns, not yet ordered by __syncwarp),
/// or the CTA's (another tile over the same floats, or the scratch).
Order orderAfter(const std::vector<Span> &done, const Span &s,
                 bool ownColumns) {
  Order order = Order::None;
  for (const Span &x : done) {
    if (!(x.begin < s.end && s.begin < x.end))
      continue;
    if (!ownColumns || !x.value || x.value != s.value)
      return Order::CTA;
    if (!x.warpOrdered)
      order = Order::Warp;
  }
  return order;
}

/// Threads of one op touch other threads' elements, so two ops need a
/// barrier between them exactly when the second reads what the first wrote
/// or writes what the first read or wrote. Independent ops (the loads of a
/// chunk, for one) run back to back.
void KernelPrinter::barrierIfNeeded(Operation *inner) {
  Value state = carried();
  std::vector<Span> reads, writes;
  if (registers && registers->products.contains(inner) &&
      registers->scratchFloats > 0) {
    if (registers->hoistedProducts.contains(inner) && partialsReducer(inner))
      return; // prints nothing: the matmul before it did the reduction
    return productBarriers(inner);
  }
  for (Value operand : tileReads(inner))
    reads.push_back(range(operand));
  for (Value written : access().writes(inner))
    writes.push_back(range(written));
  if (isa<YieldOp>(inner) && !registers)
    writes.push_back(range(state));
  // The scratch region: an op that uses it reads and writes it, so two such
  // ops in a row are ordered.
  if (usesScratch(inner) && scratchOffset >= 0) {
    Span region{scratchOffset, scratchOffset + scratchFloats};
    reads.push_back(region);
    writes.push_back(region);
  }
  barrierIfNeeded(std::move(reads), std::move(writes));
}

/// A state product whose warps split the key columns runs in two phases
/// around a barrier of its own: the mma phase reads X and writes its
/// partial sums to scratch; the reduction reads them (and its epilogue's
/// tile) and writes the result. Only the first phase orders against what
/// came before.
void KernelPrinter::productBarriers(Operation *product) {
  Span region{scratchOffset, scratchOffset + scratchFloats};
  Value base = registers->epilogueBase(product);
  std::vector<Span> reads{region}, writes{region};
  // A hoisted product's partials were summed in an earlier product's call,
  // before its barrier: only the reduction is left, reading them.
  if (!registers->hoistedProducts.contains(product)) {
    for (Value operand : registers->tileReads(product))
      if (operand != base)
        reads.push_back(range(operand));
    barrierIfNeeded(std::move(reads), std::move(writes));
    hazards = {}; // the product's own barrier
  }
  reads = {region};
  if (base)
    reads.push_back(range(base));
  writes.clear();
  for (Value written : access().writes(product))
    writes.push_back(range(written));
  barrierIfNeeded(std::move(reads), std::move(writes));
}

void KernelPrinter::barrierIfNeeded(std::vector<Span> reads,
                                    std::vector<Span> writes) {
  Order order = Order::None;
  for (const Span &r : reads)
    order = std::max(order, orderAfter(hazards.writes, r, ownColumns));
  for (const Span &w : writes)
    order = std::max({order, orderAfter(hazards.writes, w, ownColumns),
                      orderAfter(hazards.reads, w, ownColumns)});
  if (order == Order::CTA)
    barrier();
  else if (order == Order::Warp)
    warpBarrier();
  llvm::append_range(hazards.reads, reads);
  llvm::append_range(hazards.writes, writes);
}

/// A stored value's rows in this chunk's workspace record: written whole by
/// the prepare kernel, read one value tile at a time by the scan.
std::string KernelPrinter::workspaceAddress(Operation *stored,
                                            const std::string &record) {
  const cuda::TileShape &tile = shape(stored->getResult(0));
  int64_t columns = split->columns.lookup(stored);
  return llvm::formatv(
      "({0} *)({1} + {2}){3}",
      split->halfStored.contains(stored) ? mmaType() : "float",
      record.empty() ? recordAddress() : record, split->offset.lookup(stored),
      tile.valueColumns && columns != tile.cols
          ? llvm::formatv(" + vt * {0}", tile.cols).str()
          : "");
}

std::string KernelPrinter::recordAddress() {
  return llvm::formatv("p.chunk_data + (slot * {0} + hv) * {1}LL",
                       spec.valueHeads, split->recordFloats);
}

std::optional<KernelPrinter::TileLoad>
KernelPrinter::tileLoad(Operation *inner) {
  if (loadsStored() && split->stored.contains(inner)) {
    Value v = inner->getResult(0);
    // StateSplit gives every record and value 16-byte words.
    return TileLoad{shape(v).rows,
                    shape(v).cols,
                    split->halfStored.contains(inner) ? mmaType() : "float",
                    buf(v),
                    workspaceAddress(inner),
                    split->columns.lookup(inner),
                    /*aligned=*/true,
                    split->lastRowOnly.contains(inner) ? "1" : "n"};
  }
  if (auto load = dyn_cast<LoadOp>(inner))
    return inputLoad(load);
  if (isa<LoadOutputGradOp>(inner)) {
    const char *T = elementType(spec.dtype);
    int64_t V = spec.valueDim, HV = spec.valueHeads;
    TileLoad t{c, tileV, T, buf(inner->getResult(0)), "", HV * V};
    t.base = llvm::formatv("(const {0} *)d.d_o", T);
    t.offset = llvm::formatv("(t0 * {0} + hv) * {1} + vt * {2}", HV, V, tileV);
    t.src = t.base + " + " + t.offset;
    return t;
  }
  return std::nullopt;
}

void KernelPrinter::printAccumulate(AccumulateOp o) {
  int64_t K = spec.keyDim, V = spec.valueDim, H = spec.heads,
          HV = spec.valueHeads;
  const cuda::TileShape &tile = shape(o.getValue());
  std::string x = buf(o.getValue());
  // Rows of a [tokens, heads, cols] gradient from this chunk's first token.
  auto rows = [&](const char *name, int64_t heads, const char *head,
                  int64_t cols, const std::string &columnOffset = "") {
    os << llvm::formatv("    accumulate_rows<{0}, {1}>(d.{2} + (t0 * {3} + "
                        "{4}) * {5}{6}, {7}LL, {8}, n);\n",
                        tile.rows, tile.cols, name, heads, head, cols,
                        columnOffset, heads * cols, x);
  };
  // A per-head parameter: its head's share of the chunk's valid rows.
  auto perHead = [&](const char *name, bool whole) {
    os << llvm::formatv("    if (d.{0})\n"
                        "      accumulate_columns<{1}, {2}, {3}>(d.{0} + hv * "
                        "{4}, {5}, n);\n",
                        name, tile.rows, tile.cols, whole ? "true" : "false",
                        whole ? 1 : tile.cols, x);
  };
  switch (o.getOperand()) {
  case ir::Gradient::q:
    return rows("dq", H, "kh", K);
  case ir::Gradient::k:
    return rows("dk", H, "kh", K);
  case ir::Gradient::v:
    return rows("dv", HV, "hv", V, llvm::formatv(" + vt * {0}", tileV).str());
  case ir::Gradient::g:
    if (spec.decay == DecayKind::FixedPerHead)
      return perHead("dg", /*whole=*/true);
    return rows("dg", HV, "hv", tile.cols);
  case ir::Gradient::beta:
    return rows("dbeta", HV, "hv", 1);
  case ir::Gradient::a:
    return rows("da", HV, "hv", K);
  case ir::Gradient::b:
    return rows("db", HV, "hv", K);
  case ir::Gradient::gate_a_log:
    return perHead("d_gate_a_log", /*whole=*/true);
  case ir::Gradient::gate_dt_bias:
    return perHead("d_gate_dt_bias", /*whole=*/false);
  }
}

std::optional<KernelPrinter::TileLoad> KernelPrinter::inputLoad(LoadOp load) {
  const char *T = elementType(spec.dtype);
  int64_t K = spec.keyDim, V = spec.valueDim, H = spec.heads,
          HV = spec.valueHeads;
  std::string dst = buf(load.getResult());
  auto tile = [&](const char *type, std::string base, std::string offset,
                  int64_t stride, int64_t cols) {
    TileLoad t{c, cols, type, dst, base + " + " + offset, stride};
    t.base = std::move(base);
    t.offset = std::move(offset);
    return t;
  };
  auto keyRows = [&](const char *type, const char *name) {
    return tile(type, llvm::formatv("(const {0} *)p.{1}", type, name),
                llvm::formatv("(t0 * {0} + kh) * {1}", H, K), H * K, K);
  };
  auto valueHeadRows = [&](const char *type, const char *name, int64_t cols) {
    return tile(type, llvm::formatv("(const {0} *)p.{1}", type, name),
                llvm::formatv("(t0 * {0} + hv) * {1}", HV, cols), HV * cols,
                cols);
  };
  switch (load.getOperand()) {
  case ir::Operand::q:
    return keyRows(T, "q");
  case ir::Operand::k:
    return keyRows(T, "k");
  case ir::Operand::v:
    return tile(T, llvm::formatv("(const {0} *)p.v", T),
                llvm::formatv("(t0 * {0} + hv) * {1} + vt * {2}", HV, V, tileV),
                HV * V, tileV);
  case ir::Operand::a:
    return valueHeadRows(T, "a", K);
  case ir::Operand::b:
    return valueHeadRows(T, "b", K);
  case ir::Operand::beta:
    return tile("float", "p.beta", llvm::formatv("t0 * {0} + hv", HV), HV, 1);
  case ir::Operand::g:
    if (spec.decay == DecayKind::FixedPerHead)
      return std::nullopt; // filled from p.g[hv], see printOp
    if (spec.decay == DecayKind::Scalar)
      return tile("float", "p.g", llvm::formatv("t0 * {0} + hv", HV), HV, 1);
    return valueHeadRows("float", "g", K);
  case ir::Operand::o:
    return std::nullopt; // rejected by the verifier
  }
  return std::nullopt;
}

void KernelPrinter::printTileLoad(Operation *inner, const TileLoad &load) {
  if (defersLoads() && copyable(inner) && inSharedMemory(inner->getResult(0))) {
    // Kept in its global element type: cp.async, with the chunk states.
    os << copyCall(load, load.dst, load.src);
    copiesPending = true;
    return;
  }
  if (defersLoads()) {
    // At most kLoadsInFlight tiles wait in registers (the oldest, issued
    // first, has had the others' issue time to land): the gradients kernel
    // runs at 128 registers a thread, and rwkv7's, all nine of its loads
    // through registers, spilled and ran 6 % slower.
    if (pendingCommits.size() == kLoadsInFlight) {
      os << pendingCommits.front();
      pendingCommits.erase(pendingCommits.begin());
    }
    std::string name = "fetched" + std::to_string(fetchesPrinted++);
    os << llvm::formatv("    tile_fetch<{0}, {1}, {2}> {3};\n", load.rows,
                        load.cols, load.type, name)
       << fetchCall(name, load, load.src);
    pendingCommits.push_back(
        llvm::formatv("    {0}.commit({1});\n", name, load.dst).str());
    return;
  }
  os << llvm::formatv("    load_tile<{0}, {1}, {2}>({3}, {4}, {5}LL, {6});\n",
                      load.rows, load.cols, load.type, load.dst, load.src,
                      load.stride, load.validRows);
}

bool KernelPrinter::copyable(Operation *inner) {
  std::optional<TileLoad> load = tileLoad(inner);
  const cuda::TileShape &tile = shape(inner->getResult(0));
  if (load->type == "float")
    return !tile.packed;
  return tile.packed && tile.cols % 8 == 0;
}

void KernelPrinter::printPrefetchSetup() {
  // Each tile's address walks with the chunks instead of being recomputed
  // from t0 and the slot (64-bit arithmetic, 40% of mamba2's scan
  // instructions; docs/perf-notes.md): an element offset per
  // input row layout, C rows a chunk, and one for the workspace, whose
  // records of a sequence's consecutive chunks are consecutive. One cursor
  // for all the workspace's tiles keeps the registers it costs down.
  std::string declarations, aims, fetches, advances;
  bool workspace = false;
  // Inputs at the same offset with the same stride (q and k, or a and b)
  // share a cursor: one 64-bit register fewer in the loop each.
  llvm::SmallVector<std::pair<std::string, int64_t>, 4> cursors;
  for (auto [index, inner] : llvm::enumerate(fetched)) {
    std::optional<TileLoad> load = tileLoad(inner);
    std::string src;
    if (loadsStored() && split->stored.contains(inner)) {
      workspace = true;
      src = workspaceAddress(inner, "record");
    } else {
      std::pair<std::string, int64_t> key{load->offset, load->stride};
      auto *it = llvm::find(cursors, key);
      std::string cursor = "cursor" + std::to_string(it - cursors.begin());
      if (it == cursors.end()) {
        cursors.push_back(key);
        declarations += "  i64 " + cursor + ";\n";
        aims += llvm::formatv("    {0} = {1};\n", cursor, load->offset).str();
        advances += llvm::formatv("    {0} {1}= {2}LL;\n", cursor,
                                  walksBack() ? '-' : '+', c * load->stride);
      }
      src = load->base + " + " + cursor;
    }
    if (copiedAsync(inner)) {
      fetches +=
          copyCall(*load,
                   llvm::formatv("({0} *)(smem + {1} + into)", load->type,
                                 layout.offset.lookup(inner->getResult(0))),
                   src);
      continue;
    }
    std::string fetcher = "fetched" + std::to_string(index);
    os << llvm::formatv("  tile_fetch<{0}, {1}, {2}> {3};\n", load->rows,
                        load->cols, load->type, fetcher);
    fetches += fetchCall(fetcher, *load, src);
  }
  if (workspace) {
    declarations += "  const float *record;\n";
    aims += "    record = " + recordAddress() + ";\n";
    advances +=
        llvm::formatv("    record {0}= {1}LL;\n", walksBack() ? '-' : '+',
                      spec.valueHeads * split->recordFloats);
  }
  // The reverse scan walks from the sequence's last chunk to its first.
  std::string start =
      walksBack()
          ? llvm::formatv("    // At the sequence's last chunk.\n"
                          "    const i64 t0 = begin + (chunks - 1) * {0};\n"
                          "    const i64 slot = chunk_slot(begin, seq, chunks "
                          "- 1, {0});\n",
                          c)
                .str()
          : llvm::formatv("    // At the sequence's first chunk.\n"
                          "    const i64 t0 = begin;\n"
                          "    const i64 slot = chunk_slot(begin, seq, 0, "
                          "{0});\n",
                          c)
                .str();
  os << declarations
     << llvm::formatv("  {{\n"
                      "{5}"
                      "    (void)t0;\n"
                      "    (void)slot;\n"
                      "{1}"
                      "  }\n"
                      "{4}"
                      "  auto fetch_chunk = [&](i64 t0, int into) {{\n"
                      "    const int n = (int)min((i64){0}, end - t0);\n"
                      "{2}{3}"
                      "  };\n",
                      c, aims, fetches, advances,
                      doubled.empty()
                          ? "  // Fetched into registers, committed at the "
                            "chunk's top.\n"
                          : llvm::formatv("  // Each fetched tile has {0} "
                                          "buffers, {1} floats apart.\n",
                                          buffers, copyStride)
                                .str(),
                      start);
  // The chunk `ahead` chunks into the walk, if the sequence has it.
  auto chunkAhead = [&](int64_t ahead) {
    if (walksBack())
      return llvm::formatv("  if (chunks - 1 - {0} >= 0)\n"
                           "    fetch_chunk(begin + (chunks - 1 - {0}) * {1}, ",
                           ahead, c)
          .str();
    return llvm::formatv("  if (begin + {0} < end)\n"
                         "    fetch_chunk(begin + {0}, ",
                         ahead * c)
        .str();
  };
  if (doubled.empty()) {
    os << (walksBack() ? chunkAhead(0)
                       : std::string("  if (begin < end)\n"
                                     "    fetch_chunk(begin, "))
       << "0);\n";
    return;
  }
  // One group of copies a chunk, issued even when empty (past the end), so
  // that copies_landed<buffers - 2> always waits for this chunk's.
  os << "  int ring = 0;\n";
  for (int64_t ahead = 0; ahead + 1 < buffers; ++ahead)
    os << chunkAhead(ahead) << ahead * copyStride
       << ");\n"
          "  copies_issued();\n";
}

void KernelPrinter::printPrefetchLanding() {
  for (auto [index, inner] : llvm::enumerate(fetched))
    if (!copiedAsync(inner))
      os << llvm::formatv("    fetched{0}.commit({1});\n", index,
                          buf(inner->getResult(0)));
  // This chunk's copies landed; the groups of the chunks after it may not.
  if (!doubled.empty())
    os << llvm::formatv("    copies_landed<{0}>();\n", buffers - 2);
  // After the barrier no warp reads the previous chunk's buffers any more:
  // the fetch of the chunk buffers - 1 ahead may write them.
  barrier();
  // The chunk buffers - 1 further along the walk, if the sequence has it.
  int64_t ahead = std::max<int64_t>(buffers - 1, 1);
  std::string next = walksBack() ? llvm::formatv("    if (chunk - {0} >= 0)\n"
                                                 "      fetch_chunk(t0 - {1}, ",
                                                 ahead, ahead * c)
                                       .str()
                                 : llvm::formatv("    if (t0 + {0} < end)\n"
                                                 "      fetch_chunk(t0 + {0}, ",
                                                 ahead * c)
                                       .str();
  if (doubled.empty()) {
    os << next << "0);\n";
    return;
  }
  int64_t last = (buffers - 1) * copyStride;
  os << next
     << llvm::formatv("ring == 0 ? {0} : ring - {1});\n"
                      "    copies_issued();\n",
                      last, copyStride);
}

/// Whether `reader` takes `v` only as an operand of a tensor-core product:
/// the X of a state product, Y or Z of the product folded into a state
/// update, or an operand of a matmul. A state product's epilogue base T (T
/// +- X S) counts too: the device library reads it from a packed tile as
/// well (StateRegisters.cuh's base_elements), the 16-bit values converted
/// as an fp32 tile would have held them.
bool KernelPrinter::readsAsMmaOperand(Operation *reader, Value v) {
  if (registers) {
    if (registers->products.contains(reader)) {
      if (Operation *second = registers->hoisted.lookup(reader))
        if (cast<MatmulOp>(second).getLhs() == v)
          return true;
      return cast<MatmulOp>(reader).getLhs() == v ||
             registers->epilogueBase(reader) == v;
    }
    if (Operation *product = registers->foldedInto.lookup(reader))
      return llvm::is_contained(product->getOperands(), v);
    if (auto terms = registers->sumTerms.find(reader);
        terms != registers->sumTerms.end())
      return llvm::any_of(terms->second, [&](const cuda::StateTerm &term) {
        return term.product &&
               llvm::is_contained(term.product->getOperands(), v);
      });
  }
  return isa<MatmulOp>(reader);
}

bool KernelPrinter::keepsToOwnColumns(const llvm::SetVector<Operation *> &ops) {
  if (!registers || !registers->ownColumns || fetched.empty())
    return false;
  llvm::DenseSet<Value> landed, written;
  for (Operation *inner : fetched)
    landed.insert(inner->getResult(0));
  auto whole = [&](Value v) { return landed.contains(v); };
  auto own = [&](Value v) { return landed.contains(v) || written.contains(v); };
  for (Operation *inner : ops) {
    if (fetched.contains(inner) || registers->printsNothing(inner) ||
        isa<YieldOp>(inner) ||
        (isa<StoreOp>(inner) && storedDirect.contains(inner)))
      continue;
    if (registers->products.contains(inner)) {
      Value base = registers->epilogueBase(inner);
      if (!whole(cast<MatmulOp>(inner).getLhs()) || (base && !own(base)))
        return false;
      for (Value result : registers->tileWrites(inner))
        written.insert(result);
      continue;
    }
    if (Operation *product = registers->fusedProduct.lookup(inner)) {
      auto matmul = cast<MatmulOp>(inner);
      if (!whole(cast<MatmulOp>(product).getLhs()) || !whole(matmul.getLhs()) ||
          !own(matmul.getRhs()))
        return false;
      continue;
    }
    if (auto decay = dyn_cast<DecayStateOp>(inner)) {
      if (!whole(decay.getLogGates()))
        return false;
      continue;
    }
    if (auto add = dyn_cast<AddOp>(inner); add && inRegisters(add.getResult())) {
      // S + Y^T Z: Z^T's rows are the warp's value columns, Y is read whole;
      // S + T reads the warp's columns of T.
      if (Operation *folded = registers->foldedInto.lookup(inner)) {
        auto product = cast<MatmulOp>(folded);
        if (!whole(product.getLhs()) || !own(product.getRhs()))
          return false;
      } else if (!own(inRegisters(add.getLhs()) ? add.getRhs() : add.getLhs())) {
        return false;
      }
      continue;
    }
    if (auto terms = registers->sumTerms.find(inner);
        terms != registers->sumTerms.end()) {
      // As the add's terms, each.
      for (const cuda::StateTerm &term : terms->second) {
        auto product = dyn_cast_or_null<MatmulOp>(term.product);
        if (product ? !whole(product.getLhs()) || !own(product.getRhs())
                    : !own(term.tile))
          return false;
      }
      continue;
    }
    return false;
  }
  return true;
}

void KernelPrinter::spillPastSharedMemory() {
  // The tiles layOut put in global memory lie past layout.sharedFloats.
  sharedFloats = layout.sharedFloats;
  spillFloats = (layout.totalFloats - sharedFloats + 3) / 4 * 4;
  if (sharedFloats <= kSharedBudgetFloats)
    return;
  // Not even so: everything past the budget goes (a state may, too).
  int64_t boundary = kSharedBudgetFloats;
  auto straddles = [&](int64_t begin, int64_t floats) {
    if (begin < boundary && boundary < begin + floats)
      boundary = begin;
  };
  // Lower the boundary until no region crosses it (each move can only
  // uncover regions further down, so repeat until it settles).
  for (int64_t before = -1; before != boundary;) {
    before = boundary;
    for (auto &[value, offset] : layout.offset)
      straddles(offset, shape(value).floats());
    if (scratchOffset >= 0)
      straddles(scratchOffset, scratchFloats);
  }
  sharedFloats = boundary;
  spillFloats = (layout.totalFloats - boundary + 3) / 4 * 4;
}

void KernelPrinter::foldTransposes(const llvm::SetVector<Operation *> &ops) {
  for (Operation *inner : ops) {
    auto transpose = dyn_cast<TransposeOp>(inner);
    if (!transpose)
      continue;
    Operation *def = transpose.getInput().getDefiningOp();
    if (def && isa<LoadOp, LoadOutputGradOp>(def))
      continue;
    bool onlyRhs = llvm::all_of(transpose->getUsers(), [&](Operation *user) {
      auto matmul = dyn_cast<MatmulOp>(user);
      return matmul && matmul.getRhs() == transpose.getResult() &&
             matmul.getLhs() != transpose.getResult();
    });
    if (onlyRhs)
      foldedTransposes.insert(inner);
  }
}

void KernelPrinter::choosePackedStates(
    const llvm::SetVector<Operation *> &ops) {
  // The backward's chunk-parallel kernel may read the chunk's two states
  // as the workspace keeps them, bf16, where every op reading one takes
  // 16-bit operands: the tensor-core products (through ldmatrix) and the
  // row dots. The fp32 tile held the same bf16 values converted, so the
  // results are the same, in half the shared memory.
  auto packable = [&](Value state) {
    if (!bf16ChunkStates || !mma || shape(state).cols % 8 != 0)
      return false;
    return llvm::all_of(ops, [&](Operation *reader) {
      return !llvm::is_contained(tileReads(reader), state) ||
             readsAsMmaOperand(reader, state) || isa<RowDotOp>(reader);
    });
  };
  if (choosePacked) {
    chosenPackedStates.clear();
    for (BlockArgument state : body().getArguments())
      if (packable(state)) {
        kernelShapes[state].packed = true;
        chosenPackedStates.push_back(state.getArgNumber());
      }
    return choosePackedLoads(ops);
  }
  auto recorded = op->getAttrOfType<DenseI64ArrayAttr>(kPackedStatesAttr);
  for (int64_t index : recorded ? recorded.asArrayRef() : ArrayRef<int64_t>()) {
    Value state = body().getArgument(index);
    if (!packable(state)) {
      if (refusal.empty())
        refusal = llvm::formatv("'lina.packed_states' keeps state {0} packed "
                                "in bf16, but the gradients kernel reads it "
                                "as fp32 (run -lina-pack-states to choose)",
                                index)
                      .str();
      continue;
    }
    kernelShapes[state].packed = true;
  }
  choosePackedLoads(ops);
}

void KernelPrinter::choosePackedLoads(const llvm::SetVector<Operation *> &ops) {
  // The 16-bit tiles the gradients kernel loads (inputs, dL/do, values the
  // record holds in bf16 for products) where only tensor-core products read
  // them, as the other kernels keep theirs (choosePackedTiles): the loaded
  // elements as they are, read by ldmatrix, in half the shared memory of
  // the fp32 tile that held them converted.
  auto packable = [&](Operation *inner) {
    return mma && ops.contains(inner) && loadsForProductsAlone(inner, ops);
  };
  if (choosePacked) {
    chosenPackedLoads.clear();
    for (Operation *inner : ops)
      if (packLoads && packable(inner)) {
        kernelShapes[inner->getResult(0)].packed = true;
        chosenPackedLoads.push_back(inner);
      }
    return;
  }
  for (Operation &inner : body()) {
    if (!inner.hasAttr(kPackedAttr))
      continue;
    if (!packable(&inner)) {
      if (refusal.empty())
        refusal = llvm::formatv("'{0}' records lina.packed, but the "
                                "gradients kernel does not load its tile in "
                                "16 bits for tensor-core products alone (run "
                                "-lina-pack-states to choose)",
                                inner.getName().getStringRef())
                      .str();
      continue;
    }
    kernelShapes[inner.getResult(0)].packed = true;
  }
}

void KernelPrinter::choosePackedTiles(const llvm::SetVector<Operation *> &ops) {
  if (kind == Kind::Backward)
    return choosePackedStates(ops);
  // Inputs read straight by ldmatrix: 16-bit tiles of the mma's operand
  // type (bf16, or f16 for an f16 spec); f32 specs multiply on the fp32
  // units. The backward's reverse scan too: the records it loads and
  // dL/do are operands of its products only.
  if (spec.dtype == DType::F32 || !mma)
    return;
  // (Loads are never stored by a prepare kernel, which reads stored tiles
  // as fp32: StateSplit stores only computed values.)
  for (Operation *inner : ops)
    if (!(rows && rows->isFetched(inner)) && loadsForProductsAlone(inner, ops))
      kernelShapes[inner->getResult(0)].packed = true;
}

bool KernelPrinter::loadsForProductsAlone(
    Operation *inner, const llvm::SetVector<Operation *> &ops) {
  std::optional<TileLoad> load = tileLoad(inner);
  if (!load || load->type != mmaType())
    return false;
  Value v = inner->getResult(0);
  // ldmatrix reads 8-element (16-byte) rows.
  return shape(v).cols % 8 == 0 && llvm::all_of(ops, [&](Operation *reader) {
           return !llvm::is_contained(tileReads(reader), v) ||
                  readsAsMmaOperand(reader, v);
         });
}

Operation *KernelPrinter::outputProducer(StoreOp store) {
  Value v = store.getValue();
  Operation *def = v.getDefiningOp();
  Operation *product = def ? registers->epilogueOps.lookup(def) : nullptr;
  if (!v.hasOneUse() || !product)
    return nullptr;
  if (Operation *matmul = registers->fusedMatmul.lookup(product))
    return matmul;
  if (!registers->hoistedProducts.contains(product))
    return product;
  return registers->reducedBy.lookup(product);
}

void KernelPrinter::directOutputs(const llvm::SetVector<Operation *> &ops) {
  for (Operation *inner : ops)
    if (auto store = dyn_cast<StoreOp>(inner))
      if (Operation *producer = outputProducer(store)) {
        storedDirect.insert(producer);
        storedDirect.insert(store);
      }
}

std::string KernelPrinter::outputRows() {
  const char *T = elementType(spec.dtype);
  return llvm::formatv("global_rows<{0}>{{({0} *)p.o + (t0 * {1} + hv) * {2} "
                       "+ vt * {3}, {4}LL, n}",
                       T, spec.valueHeads, spec.valueDim, tileV,
                       spec.valueHeads * spec.valueDim);
}

bool KernelPrinter::printRegisterStateOp(Operation *inner) {
  if (!registers)
    return false;
  // A folded product is accumulated into the state by the add that reads
  // it; an epilogue is done in the reduction pass of the product before it.
  if (registers->printsNothing(inner))
    return true;
  if (registers->products.contains(inner)) {
    auto matmul = cast<MatmulOp>(inner);
    if (Operation *second = registers->hoisted.lookup(inner)) {
      auto later = cast<MatmulOp>(second);
      os << llvm::formatv("    S.partials<{0}>({1}, {2});\n",
                          shape(later.getResult()).rows, secondScratch(),
                          buf(later.getLhs()));
    }
    if (registers->hoistedProducts.contains(inner)) {
      if (partialsReducer(inner))
        return true; // the matmul before it reduced the partials
      Value base = registers->epilogueBase(inner);
      Value dst = base ? Value(registers->epilogue.lookup(inner)->getResult(0))
                       : Value(matmul.getResult());
      os << llvm::formatv("    S.reduce<{0}, {1}>({2}, {3}, {4});\n",
                          shape(matmul.getResult()).rows,
                          base ? registers->epilogueSign(inner) : 0, buf(dst),
                          secondScratch(), base ? buf(base) : "nullptr");
      return true;
    }
    if (Value base = registers->epilogueBase(inner)) {
      if (storedDirect.contains(inner)) {
        os << llvm::formatv("    S.product_into<{0}, {1}>({2}, {3}, {4}, {5});\n",
                            shape(matmul.getResult()).rows,
                            registers->epilogueSign(inner), outputRows(),
                            buf(matmul.getLhs()), stateScratch(), buf(base));
        return true;
      }
      os << llvm::formatv(
          "    S.product<{0}, {1}>({2}, {3}, {4}, {5});\n",
          shape(matmul.getResult()).rows, registers->epilogueSign(inner),
          buf(registers->epilogue.lookup(inner)->getResult(0)),
          buf(matmul.getLhs()), stateScratch(), buf(base));
      return true;
    }
    os << llvm::formatv("    S.product<{0}>({1}, {2}, {3});\n",
                        shape(matmul.getResult()).rows,
                        buf(matmul.getResult()), buf(matmul.getLhs()),
                        stateScratch());
    return true;
  }
  if (auto decay = dyn_cast<DecayStateOp>(inner)) {
    os << llvm::formatv("    S.decay<{0}, {1}>({2});\n",
                        gateCols(decay.getLogGates()),
                        factorsStored(decay.getLogGates()) ? "true" : "false",
                        lastGateRow(decay.getLogGates()));
    return true;
  }
  if (auto add = dyn_cast<AddOp>(inner); add && inRegisters(add.getResult())) {
    if (Operation *folded = registers->foldedInto.lookup(inner)) {
      auto product = cast<MatmulOp>(folded);
      os << llvm::formatv("    S.update<{0}>({1}, {2});\n",
                          shape(product.getLhs()).rows,
                          buf(product.getLhs()), buf(product.getRhs()));
    } else {
      Value tile = inRegisters(add.getLhs()) ? add.getRhs() : add.getLhs();
      os << llvm::formatv("    S.add_tile({0});\n", buf(tile));
    }
    return true;
  }
  if (auto terms = registers->sumTerms.find(inner);
      terms != registers->sumTerms.end()) {
    for (const cuda::StateTerm &term : terms->second) {
      if (auto product = dyn_cast_or_null<MatmulOp>(term.product))
        os << llvm::formatv("    S.update<{0}, {1}>({2}, {3});\n",
                            shape(product.getLhs()).rows, term.sign,
                            buf(product.getLhs()), buf(product.getRhs()));
      else
        os << llvm::formatv("    S.add_tile<{0}>({1});\n", term.sign,
                            buf(term.tile));
    }
    return true;
  }
  return false;
}

void KernelPrinter::landLoads() {
  for (const std::string &commit : pendingCommits)
    os << commit;
  pendingCommits.clear();
  if (copiesPending)
    os << "    copies_issued();\n    copies_landed<0>();\n";
  copiesPending = false;
}

void KernelPrinter::printOp(Operation *inner) {
  std::optional<TileLoad> load = tileLoad(inner);
  if (defersLoads() && !load)
    landLoads();
  // Landed at the chunk's top (printPrefetchLanding).
  if (fetched.contains(inner))
    return;
  // Read transposed by the matmuls it feeds.
  if (foldedTransposes.contains(inner))
    return;
  if (auto yield = dyn_cast<YieldOp>(inner))
    if (registers ||
        buf(yield.getState()) == buf(carried()))
      return;
  if (rows) {
    if (rows->isFetched(inner)) {
      // Its rows wait in registers for the pass: no tile, no barrier.
      os << llvm::formatv("    row_fetch<{0}, {1}, {2}> {3};\n"
                          "    {3}.fetch({4}, {5}LL, n);\n",
                          load->rows, load->cols, load->type,
                          fetchedRows(inner), load->src, load->stride);
      return;
    }
    if (const cuda::RowPass *pass = rows->passOfMember(inner)) {
      if (inner == pass->last()) {
        barrierIfNeeded(inner);
        printRowPass(*pass);
      }
      return;
    }
  }
  barrierIfNeeded(inner);
  if (printRegisterStateOp(inner))
    return;
  if (load)
    return printTileLoad(inner, *load);
  // A prepare kernel stores what it makes of the split's values, unless
  // another prepare kernel stores the same value (StateSplit's shareRecord).
  bool stored = split && split->stored.contains(inner) &&
                !split->storedElsewhere.contains(inner);
  auto n = [&](Value v) { return shape(v).floats(); };
  TypeSwitch<Operation *>(inner)
      .Case([&](LoadOp o) {
        // The one load that is no tile copy: a fixed per-head gate.
        if (o.getOperand() == ir::Operand::g)
          os << llvm::formatv("    fill_rows<{0}>({1}, p.g[hv], n);\n", c,
                              buf(o.getResult()));
      })
      .Case([&](StoreOp o) {
        if (access().storedByProducer(inner))
          return; // written by the op that made the value
        os << llvm::formatv(
            "    store_tile<{0}, {1}, {2}>(({2} *)p.o + (t0 * {3} + hv) * {4} "
            "+ vt * {1}, {5}, {6}LL, n);\n",
            c, tileV, elementType(spec.dtype), spec.valueHeads, spec.valueDim,
            buf(o.getValue()), spec.valueHeads * spec.valueDim);
      })
      .Case([&](ZerosOp o) {
        os << llvm::formatv("    zeros<{0}>({1});\n", n(o.getResult()),
                            buf(o.getResult()));
      })
      .Case([&](L2NormOp o) {
        os << llvm::formatv("    l2norm<{0}, {1}>({2}, {3});\n",
                            shape(o.getResult()).rows,
                            shape(o.getResult()).cols, buf(o.getResult()),
                            buf(o.getInput()));
      })
      .Case([&](ScaleOp o) {
        os << llvm::formatv("    scale<{0}>({1}, {2}, {3});\n",
                            n(o.getResult()), buf(o.getResult()),
                            buf(o.getInput()),
                            floatLiteral(o.getFactor().convertToDouble()));
      })
      .Case([&](NegOp o) {
        os << llvm::formatv("    neg<{0}>({1}, {2});\n", n(o.getResult()),
                            buf(o.getResult()), buf(o.getInput()));
      })
      .Case([&](AddOp o) {
        os << llvm::formatv("    add<{0}>({1}, {2}, {3});\n", n(o.getResult()),
                            buf(o.getResult()), buf(o.getLhs()),
                            buf(o.getRhs()));
      })
      .Case([&](SubOp o) {
        os << llvm::formatv("    sub<{0}>({1}, {2}, {3});\n", n(o.getResult()),
                            buf(o.getResult()), buf(o.getLhs()),
                            buf(o.getRhs()));
      })
      .Case([&](GateOp o) {
        int64_t gc = gateCols(o.getResult());
        std::string bias = llvm::formatv(
            "p.gate_dt_bias ? p.gate_dt_bias + hv * {0} : nullptr", gc);
        if (o.getSource() == ir::GateSource::softplus)
          os << llvm::formatv(
              "    gate_softplus<{0}, {1}>({2}, {3}, p.gate_a_log[hv], {4}, "
              "n);\n",
              c, gc, buf(o.getResult()), buf(o.getInput()), bias);
        else
          os << llvm::formatv("    gate_lower_bound<{0}, {1}>({2}, {3}, "
                              "p.gate_a_log[hv], {4}, {5}, n);\n",
                              c, gc, buf(o.getResult()), buf(o.getInput()),
                              bias,
                              floatLiteral(o.getLowerBound()->convertToDouble()));
      })
      .Case([&](BetaOp o) {
        double factor = o.getSource() == ir::BetaSource::two_sigmoid ? 2 : 1;
        os << llvm::formatv("    beta_sigmoid<{0}>({1}, {2}, {3}, n);\n", c,
                            buf(o.getResult()), buf(o.getInput()),
                            floatLiteral(factor));
      })
      .Case([&](CumsumOp o) {
        os << llvm::formatv("    cumsum<{0}, {1}>({2}, {3}, n, {4});\n", c,
                            gateCols(o.getResult()), buf(o.getResult()),
                            buf(o.getInput()),
                            o.getExclusive() ? "true" : "false");
      })
      .Case([&](ScaleRowsOp o) {
        os << llvm::formatv("    scale_rows<{0}, {1}>({2}, {3}, {4});\n",
                            shape(o.getResult()).rows,
                            shape(o.getResult()).cols, buf(o.getResult()),
                            buf(o.getInput()), buf(o.getWeights()));
      })
      .Case([&](DecayRowsOp o) {
        os << llvm::formatv(
            "    decay_rows<{0}, {1}, {2}>({3}, {4}, {5}, n, {6});\n",
            shape(o.getResult()).rows, shape(o.getResult()).cols,
            gateCols(o.getLogGates()), buf(o.getResult()), buf(o.getInput()),
            buf(o.getLogGates()), o.getToEnd() ? "true" : "false");
      })
      .Case([&](DecayStateOp o) {
        os << llvm::formatv(
            "    decay_state<{0}, {1}, {2}, {3}>({4}, {5}, {6});\n",
            shape(o.getResult()).rows, shape(o.getResult()).cols,
            gateCols(o.getLogGates()),
            factorsStored(o.getLogGates()) ? "true" : "false",
            buf(o.getResult()), buf(o.getState()),
            lastGateRow(o.getLogGates()));
      })
      .Case([&](DecayProductOp o) {
        os << llvm::formatv(
            "    decay_product<{0}, {1}, {2}, {3}>({4}, {5}, {6}, {7}, {8}, n, "
            "{9}{10});\n",
            c, shape(o.getLhs()).cols, gateCols(o.getLhsGates()),
            mma ? "true" : "false", buf(o.getResult()), buf(o.getLhs()),
            buf(o.getRhs()), buf(o.getLhsGates()), buf(o.getRhsGates()),
            o.getMask() == ir::Mask::strict ? "true" : "false",
            decayScratchFloats(inner) > 0 ? ", " + scratch() : "");
      })
      .Case([&](TriSolveOp o) {
        if (storedDirect.contains(inner)) {
          os << llvm::formatv(
              "    tri_solve_to_global<{0}, {1}>({2}, {3}LL, {4}, {5}, n);\n",
              shape(o.getResult()).rows, shape(o.getResult()).cols,
              workspaceAddress(inner), split->columns.lookup(inner),
              buf(o.getLower()), buf(o.getRhs()));
          return;
        }
        os << llvm::formatv("    tri_solve<{0}, {1}{5}>({2}, {3}, {4});\n",
                            shape(o.getResult()).rows,
                            shape(o.getResult()).cols, buf(o.getResult()),
                            buf(o.getLower()), buf(o.getRhs()),
                            firstThread(shape(o.getResult()).cols));
      })
      .Case([&](MatmulOp o) {
        const cuda::TileShape &lhs = shape(o.getLhs());
        int64_t contraction = o.getTransposeLhs() ? lhs.rows : lhs.cols;
        if (Operation *product =
                registers ? registers->fusedProduct.lookup(inner) : nullptr) {
          // T + X S computed in registers by the warp owning the columns,
          // written to the output (RegisterState::fusedMatmul).
          os << llvm::formatv(
              "    S.product_add_mma_into<{0}, {1}, {2}>({3}, {4}, {5}, {6});\n",
              shape(o.getResult()).rows, contraction,
              o.getTransposeLhs() ? "true" : "false", outputRows(),
              buf(cast<MatmulOp>(product).getLhs()), buf(o.getLhs()),
              buf(o.getRhs()));
          return;
        }
        if (reducedProduct(inner)) {
          // T + X S: T's epilogue adds the hoisted product's partial sums,
          // and writes the output itself when T + X S is only stored.
          bool direct = storedDirect.contains(inner);
          os << llvm::formatv(
              "    matmul_add_partials{9}<{0}, {1}, {2}, {3}, {4}, "
              "decltype(S)::kSplit>({5}, {6}, {7}, {8});\n",
              shape(o.getResult()).rows, shape(o.getResult()).cols,
              contraction, o.getTransposeLhs() ? "true" : "false",
              mma ? "true" : "false",
              direct ? outputRows() : buf(o.getResult()), buf(o.getLhs()),
              buf(o.getRhs()), secondScratch(), direct ? "_into" : "");
          return;
        }
        if (Operation *transpose = foldedRhs(o)) {
          os << llvm::formatv(
              "    product<{0}, {1}, {2}, {3}, true, {4}>({5}, {6}, {7});\n",
              shape(o.getResult()).rows, shape(o.getResult()).cols,
              contraction, o.getTransposeLhs() ? "true" : "false",
              mma ? "true" : "false", buf(o.getResult()), buf(o.getLhs()),
              buf(transpose->getOperand(0)));
          return;
        }
        os << llvm::formatv(
            "    matmul<{0}, {1}, {2}, {3}, {4}>({5}, {6}, {7});\n",
            shape(o.getResult()).rows, shape(o.getResult()).cols, contraction,
            o.getTransposeLhs() ? "true" : "false", mma ? "true" : "false",
            buf(o.getResult()), buf(o.getLhs()), buf(o.getRhs()));
      })
      .Case([&](MulOp o) {
        os << llvm::formatv("    mul<{0}>({1}, {2}, {3});\n", n(o.getResult()),
                            buf(o.getResult()), buf(o.getLhs()),
                            buf(o.getRhs()));
      })
      .Case([&](RowSumOp o) {
        os << llvm::formatv("    row_sum<{0}, {1}>({2}, {3});\n",
                            shape(o.getInput()).rows, shape(o.getInput()).cols,
                            buf(o.getResult()), buf(o.getInput()));
      })
      .Case([&](RowDotOp o) {
        os << llvm::formatv("    row_dot<{0}, {1}>({2}, {3}, {4});\n",
                            shape(o.getLhs()).rows, shape(o.getLhs()).cols,
                            buf(o.getResult()), buf(o.getLhs()),
                            buf(o.getRhs()));
      })
      .Case([&](SumOp o) {
        int64_t added = llvm::count_if(o.getTerms(), [](const auto &term) {
          return !term.subtracted;
        });
        uint64_t second = secondFactorMask(o).value_or(0);
        os << llvm::formatv("    sum<{0}, {1}", n(o.getResult()), added);
        if (second)
          os << llvm::formatv(", {0:x}ull", second);
        os << llvm::formatv(">({0}", buf(o.getResult()));
        for (Value v : o.getOperands())
          os << ", " << buf(v);
        os << ");\n";
      })
      .Case([&](ColSumOp o) {
        os << llvm::formatv("    col_sum<{0}, {1}>({2}, {3});\n",
                            shape(o.getInput()).rows, shape(o.getInput()).cols,
                            buf(o.getResult()), buf(o.getInput()));
      })
      .Case([&](StraddleSumOp o) {
        os << llvm::formatv("    straddle_sum<{0}>({1}, {2}, n);\n",
                            shape(o.getInput()).rows, buf(o.getResult()),
                            buf(o.getInput()));
      })
      .Case([&](TransposeOp o) {
        os << llvm::formatv("    transpose<{0}, {1}>({2}, {3});\n",
                            shape(o.getInput()).rows, shape(o.getInput()).cols,
                            buf(o.getResult()), buf(o.getInput()));
      })
      .Case([&](AddToLastRowOp o) {
        os << llvm::formatv("    add_to_last_row<{0}, {1}>({2}, {3}, {4}, n);\n",
                            shape(o.getResult()).rows,
                            shape(o.getResult()).cols, buf(o.getResult()),
                            buf(o.getInput()), buf(o.getRow()));
      })
      .Case([&](ReverseCumsumOp o) {
        os << llvm::formatv("    reverse_cumsum<{0}, {1}>({2}, {3}, n, {4});\n",
                            shape(o.getResult()).rows,
                            shape(o.getResult()).cols, buf(o.getResult()),
                            buf(o.getInput()),
                            o.getExclusive() ? "true" : "false");
      })
      .Case([&](DecayProductGradOp o) {
        os << llvm::formatv(
            "    decay_product_grad<{0}, {1}, {2}, {3}, {4}>({5}, {6}, {7}, "
            "{8}, {9}, n, {10}, {11});\n",
            shape(o.getGrad()).rows, shape(o.getOther()).cols,
            gateCols(o.getLhsGates()),
            o.getSide() == ir::ProductSide::lhs ? "true" : "false",
            mma ? "true" : "false", buf(o.getResult()), buf(o.getGrad()),
            buf(o.getOther()), buf(o.getLhsGates()), buf(o.getRhsGates()),
            o.getMask() == ir::Mask::strict ? "true" : "false", scratch());
      })
      .Case([&](TriSolveTransposedOp o) {
        os << llvm::formatv(
            "    tri_solve_transposed<{0}, {1}{5}>({2}, {3}, {4});\n",
            shape(o.getResult()).rows, shape(o.getResult()).cols,
            buf(o.getResult()), buf(o.getLower()), buf(o.getRhs()),
            firstThread(shape(o.getResult()).cols));
      })
      .Case([&](StrictLowerOp o) {
        os << llvm::formatv("    strict_lower<{0}, {1}>({2}, {3});\n",
                            shape(o.getResult()).rows,
                            shape(o.getResult()).cols, buf(o.getResult()),
                            buf(o.getInput()));
      })
      .Case([&](L2NormGradOp o) {
        os << llvm::formatv("    l2norm_grad<{0}, {1}>({2}, {3}, {4});\n",
                            shape(o.getResult()).rows,
                            shape(o.getResult()).cols, buf(o.getResult()),
                            buf(o.getInput()), buf(o.getGrad()));
      })
      .Case([&](BetaGradOp o) {
        double factor = o.getSource() == ir::BetaSource::two_sigmoid ? 2 : 1;
        os << llvm::formatv("    beta_grad<{0}>({1}, {2}, {3}, {4}, n);\n", c,
                            buf(o.getResult()), buf(o.getInput()),
                            buf(o.getGrad()), floatLiteral(factor));
      })
      .Case([&](GateGradOp o) {
        int64_t gc = gateCols(o.getResult());
        bool lowerBound = o.getSource() == ir::GateSource::lower_bound;
        os << llvm::formatv(
            "    gate_grad<{0}, {1}, {2}, {3}>({4}, {5}, {6}, p.gate_a_log[hv], "
            "p.gate_dt_bias ? p.gate_dt_bias + hv * {1} : nullptr, {7}, n);\n",
            c, gc, lowerBound ? "true" : "false",
            o.getWrt() == ir::GateGradWrt::a_log ? "true" : "false",
            buf(o.getResult()), buf(o.getInput()), buf(o.getGrad()),
            floatLiteral(lowerBound ? o.getLowerBound()->convertToDouble()
                                    : 0.0));
      })
      .Case([&](AccumulateOp o) { printAccumulate(o); })
      .Case([&](YieldOp o) {
        Value state = carried();
        // The new state was computed in place in the state's buffer.
        if (buf(state) == buf(o.getState()))
          return;
        os << llvm::formatv("    copy_tile<{0}>({1}, {2});\n",
                            shape(state).floats(), buf(state),
                            buf(o.getState()));
      });
  if (stored && kind == Kind::Prepare && !storedDirect.contains(inner)) {
    Value v = inner->getResult(0);
    barrierIfNeeded({range(v)}, {});
    if (split->lastRowOnly.contains(inner))
      os << llvm::formatv("    store_decay_factors<{0}>({1}, {2});\n",
                          shape(v).cols, workspaceAddress(inner),
                          lastGateRow(v));
    else
      os << llvm::formatv(
          "    store_tile<{0}, {1}, {2}>({3}, {4}, {5}LL, n);\n",
          shape(v).rows, shape(v).cols,
          split->halfStored.contains(inner) ? mmaType() : "float",
          workspaceAddress(inner), buf(v), split->columns.lookup(inner));
  }
}

void KernelPrinter::printRowPass(const cuda::RowPass &pass) {
  const cuda::TileShape &tile = shape(pass.last()->getResult(0));
  std::string row = llvm::formatv("row<{0}>", tile.cols);
  std::string names;
  for (Operation *member : pass.members)
    names += (names.empty() ? "" : ", ") +
             member->getName().stripDialect().str();
  os << llvm::formatv("    // A row pass: {0}.\n"
                      "#pragma unroll\n"
                      "    for (int i = 0; i < rows_per_warp({1}); ++i) {{\n"
                      "      const int r = row_of_warp(i);\n"
                      "      if (r >= {1})\n"
                      "        break;\n",
                      names, tile.rows);
  llvm::DenseMap<Value, std::string> name;
  auto define = [&](Value v, const std::string &expression) {
    std::string x = "x" + std::to_string(name.size());
    os << llvm::formatv("      const {0} {1} = {2};\n", row, x, expression);
    name[v] = x;
    return x;
  };
  for (Operation *load : pass.fetched) {
    Value rows = load->getResult(0);
    std::string x = define(rows, fetchedRows(load) + ".at(i)");
    if (pass.toShared.contains(rows))
      os << llvm::formatv("      {0}.to_tile({1}, r);\n", x, buf(rows));
  }
  // A row of a tile in shared memory is read once, where first needed.
  auto rowOf = [&](Value v) {
    auto it = name.find(v);
    if (it != name.end())
      return it->second;
    return define(v, row + "::from_tile(" + buf(v) + ", r)");
  };
  for (Operation *member : pass.members) {
    std::string expression =
        TypeSwitch<Operation *, std::string>(member)
            .Case([&](L2NormOp o) {
              return "normalized(" + rowOf(o.getInput()) + ")";
            })
            .Case([&](ScaleOp o) {
              return "scaled(" + rowOf(o.getInput()) + ", " +
                     floatLiteral(o.getFactor().convertToDouble()) + ")";
            })
            .Case([&](NegOp o) {
              return "negated(" + rowOf(o.getInput()) + ")";
            })
            .Case([&](AddOp o) {
              std::string lhs = rowOf(o.getLhs());
              return "sum(" + lhs + ", " + rowOf(o.getRhs()) + ")";
            })
            .Case([&](SubOp o) {
              std::string lhs = rowOf(o.getLhs());
              return "difference(" + lhs + ", " + rowOf(o.getRhs()) + ")";
            })
            .Case([&](ScaleRowsOp o) {
              return "scaled(" + rowOf(o.getInput()) + ", " +
                     buf(o.getWeights()) + "[r])";
            })
            .Case([&](DecayRowsOp o) {
              return llvm::formatv("decayed<{0}>({1}, {2}, r, n, {3})",
                                   gateCols(o.getLogGates()),
                                   rowOf(o.getInput()), buf(o.getLogGates()),
                                   o.getToEnd() ? "true" : "false")
                  .str();
            })
            .Default([](Operation *) { return std::string(); });
    Value result = member->getResult(0);
    std::string x = define(result, expression);
    if (pass.toShared.contains(result))
      os << llvm::formatv("      {0}.to_tile({1}, r);\n", x, buf(result));
    if (!(split && kind == Kind::Prepare && split->stored.contains(member) &&
          !split->storedElsewhere.contains(member)))
      continue;
    // Stored from registers: the tile, if any, is for this kernel's ops.
    if (split->lastRowOnly.contains(member))
      os << llvm::formatv("      if (r == n - 1)\n"
                          "        exponentials({0}).to_global({1}, {2}LL, 0, "
                          "1);\n",
                          x, workspaceAddress(member), tile.cols);
    else
      os << llvm::formatv("      {0}.to_global({1}, {2}LL, r, n);\n", x,
                          workspaceAddress(member),
                          split->columns.lookup(member));
  }
  os << "    }\n";
}

void KernelPrinter::layOut(const llvm::SetVector<Operation *> &order) {
  scratchOffset = -1;
  scratchFloats = registers ? registers->scratchFloats : 0;
  for (Operation *inner : order)
    scratchFloats = std::max(scratchFloats, decayScratchFloats(inner));
  const int64_t scratch = (scratchFloats + 3) / 4 * 4;
  // A backward's tiles that shared memory cannot hold go to global memory
  // (spillPastSharedMemory): the least touched ones, which lina-global-tiles
  // records.
  llvm::DenseSet<Value> inGlobal;
  if (isBackward(kind) && chooseGlobal) {
    inGlobal = cuda::chooseGlobalTiles(body(), order, kernelShapes, access(),
                                       kSharedBudgetFloats, scratch);
    chosenGlobal.clear();
    for (Value v : inGlobal)
      chosenGlobal.insert(v.getDefiningOp());
  } else if (isBackward(kind)) {
    for (Operation *inner : order)
      if (recordsInGlobal(inner))
        for (Value result : inner->getResults()) {
          // ldmatrix reads shared memory alone.
          if (kernelShapes.lookup(result).packed && refusal.empty())
            refusal =
                llvm::formatv("'{0}' records lina.in_global for the "
                              "kernel \"{1}\", which keeps its tile "
                              "packed, and a packed tile stays in "
                              "shared memory (run -lina-pack-states, "
                              "then -lina-global-tiles)",
                              inner->getName().getStringRef(), kernelRole())
                    .str();
          inGlobal.insert(result);
        }
  }
  layout = cuda::allocateShared(body(), order, kernelShapes,
                                loadsStored() ? split->stored
                                              : llvm::SetVector<Operation *>(),
                                access(), fetched, inGlobal);
  if (isBackward(kind) && !chooseGlobal && inGlobal.empty() &&
      layout.sharedFloats + scratch > kSharedBudgetFloats && refusal.empty())
    refusal = llvm::formatv("the backward's {0} needs {1} bytes of shared "
                            "memory for its tiles, more than the {2} a CTA "
                            "can have, and no op records a tile of it in "
                            "global memory (run -lina-global-tiles to place "
                            "them)",
                            kind == Kind::BackwardStateGrads
                                ? "reverse scan"
                                : "gradients kernel",
                            (layout.sharedFloats + scratch) * 4,
                            kMaxSharedBytes)
                  .str();
  if (scratchFloats > 0) {
    // In shared memory, below the tiles in global memory (whole 16-byte
    // words of them).
    scratchOffset = layout.sharedFloats;
    const bool tilesInGlobal = layout.totalFloats > layout.sharedFloats;
    const int64_t floats = tilesInGlobal ? scratch : scratchFloats;
    if (tilesInGlobal)
      for (auto &[value, offset] : layout.offset)
        if (offset >= layout.sharedFloats)
          offset += floats;
    layout.sharedFloats += floats;
    layout.totalFloats += floats;
  }
  singleFloats = layout.totalFloats;
  useRing(1);
}

int64_t KernelPrinter::ringFloats(int64_t ring) {
  if (ring < 2 || fetched.empty())
    return singleFloats;
  int64_t extent = 0;
  for (Operation *inner : fetched) {
    Value v = inner->getResult(0);
    extent = std::max(extent, layout.offset.lookup(v) + shape(v).floats());
  }
  return (ring - 1) * ringStride() + extent;
}

int64_t KernelPrinter::ringDepth(int64_t threads) {
  // Rings of buffers where they cost no occupancy that matters: they may
  // not leave room for only one CTA an SM where single buffers leave two
  // or more (f16 and f32 scans keep fp32 tiles). Three buffers, the copies
  // two chunks ahead, where every tile goes by cp.async (tiles through
  // registers would need a second set of them), and the third buffers cost
  // a CTA only above 24 warps an SM (the scans' registers allow about
  // three CTAs of eight warps).
  auto ctas = [&](int64_t ring) {
    return cuda::ctasBySharedMemory(ringFloats(ring) * 4);
  };
  auto keepsSecondCTA = [&](int64_t ring) {
    return ctas(ring) >= 2 || ctas(ring) >= ctas(1);
  };
  bool allCopyable = llvm::all_of(
      fetched, [&](Operation *inner) { return copyable(inner); });
  if (allCopyable && keepsSecondCTA(3) &&
      ctas(3) >= std::min(ctas(2), 24 / (threads / 32)))
    return 3;
  return keepsSecondCTA(2) ? 2 : 1;
}

void KernelPrinter::useRing(int64_t ring) {
  // The ring's buffers lie in shared memory: where no tile is in global
  // memory, the shared region grows with them.
  bool allShared = layout.sharedFloats == layout.totalFloats;
  buffers = fetched.empty() ? 1 : ring;
  layout.totalFloats = ringFloats(buffers);
  if (allShared)
    layout.sharedFloats = layout.totalFloats;
  copyStride = buffers < 2 ? 0 : ringStride();
  doubled.clear();
  if (buffers < 2)
    return;
  for (Operation *inner : fetched)
    doubled.insert(inner->getResult(0));
}

int64_t KernelPrinter::printKernel(const std::string &name,
                                   const llvm::SetVector<Operation *> &ops,
                                   Kind kind, int64_t threads,
                                   const cuda::StateSplit *split) {
  this->kind = kind;
  this->split = split;
  this->threads = threads;
  columnsTaken = 0;
  fetched.clear();
  doubled.clear();
  copyStride = 0;
  buffers = 1;
  bool chunkParallel = kind == Kind::MaterializeOutput || kind == Kind::Prepare;
  bool materializeStates = kind == Kind::MaterializeScan;
  registers.reset();
  rows.reset();
  rowFetchIndex.clear();
  storedDirect.clear();
  foldedTransposes.clear();
  foldTransposes(ops);
  ownColumns = false;
  scratchOffset = -1;
  scratchFloats = 0;
  if ((kind == Kind::Fused || kind == Kind::SplitScan ||
       kind == Kind::BackwardStateGrads ||
       (kind == Kind::MaterializeScan && split)) &&
      stateInRegisters) {
    registers = kind == Kind::BackwardStateGrads
                    ? cuda::planRegisterState(carried(), spec.keyDim, ops,
                                              shapes, tileV, threads / 32)
                    : cuda::planRegisterState(cast<ChunkedOp>(op), ops, shapes,
                                              tileV, threads / 32);
    if (!registers)
      refusal = "placement <state = registers>, but the state's uses or the "
                "value tile and warps do not allow it in this kernel (run "
                "-lina-place-state to place it)";
    else
      refusal = stateUseRefusal(ops);
  }
  if (registers)
    directOutputs(ops);
  kernelShapes = shapes;
  if (loadsStored())
    for (Operation *lastRow : split->lastRowOnly)
      kernelShapes[lastRow->getResult(0)].rows = 1;
  if (kind == Kind::Prepare && rowPasses) {
    // Whole rows of an input tensor can wait in registers for a row pass.
    rows = cuda::planRowPasses(ops, kernelShapes, [&](Operation *inner) {
      std::optional<TileLoad> load = tileLoad(inner);
      return load && isa<LoadOp>(inner) && load->validRows == "n" &&
             load->rows == c;
    });
    if (chooseRows) {
      chosenRowPasses.clear();
      for (auto [inner, pass] : rows->passOf)
        chosenRowPasses[inner] = pass;
    } else {
      refusal = rowPassRefusal();
    }
    int index = 0;
    for (const cuda::RowPass &pass : rows->passes)
      for (Operation *load : pass.fetched)
        rowFetchIndex[load] = index++;
  }
  if (kind == Kind::Prepare) {
    for (Operation *inner : ops)
      if (auto solve = dyn_cast<TriSolveOp>(inner)) {
        const cuda::TileShape &tile = kernelShapes[solve.getResult()];
        bool readHere = llvm::any_of(solve->getUsers(), [&](Operation *user) {
          return ops.contains(user);
        });
        if (split->stored.contains(inner) &&
            !split->storedElsewhere.contains(inner) && !readHere &&
            !split->lastRowOnly.contains(inner) && tile.rows <= 64 &&
            tile.rows % 4 == 0)
          storedDirect.insert(inner);
      }
  }
  // The ops in the order they run: row passes reorder a few.
  const llvm::SetVector<Operation *> &order = rows ? rows->order : ops;
  choosePackedTiles(order);
  bool walks = !chunkParallel && !isBackward(kind);
  // The backward's reverse scan walks the chunks too, from the last.
  bool fetchesAhead = walks || kind == Kind::BackwardStateGrads;
  if (fetchesAhead && (choosePlacement ? prefetch : fetchRing > 0))
    for (Operation *inner : order)
      if (tileLoad(inner))
        fetched.insert(inner);
  layOut(order);
  if (!fetched.empty())
    useRing(choosePlacement ? ringDepth(threads) : fetchRing);
  // A backward's reverse scan fetches ahead only where everything it has
  // fits in shared memory, rings included: cp.async writes shared memory
  // alone, and a scan's tiles in global memory are lina-global-tiles'.
  bool ringInGlobal =
      isBackward(kind) && (layout.sharedFloats < layout.totalFloats ||
                           layout.totalFloats > kSharedBudgetFloats);
  if (!fetched.empty() &&
      (layout.totalFloats * 4 > kMaxSharedBytes || ringInGlobal)) {
    // The fetched tiles' buffers do not fit: each chunk loads its tiles
    // when it reaches them instead (what lina-pipeline-loads records).
    if (!choosePlacement)
      refusal = llvm::formatv("placement <ring = {0}>, but the fetched "
                              "tiles' buffers need {1} bytes of shared "
                              "memory, more than the {2} a CTA can have (run "
                              "-lina-pipeline-loads to pipeline the loads)",
                              fetchRing, layout.totalFloats * 4,
                              kMaxSharedBytes)
                    .str();
    fetched.clear();
    layOut(order);
  }
  if (fetchesAhead)
    chosenRing = fetched.empty() ? 0 : buffers;
  ownColumns = keepsToOwnColumns(ops);
  sharedFloats = layout.totalFloats;
  spillFloats = 0;
  if (isBackward(kind))
    spillPastSharedMemory();
  Value state = body().getArgument(0);
  int64_t K = spec.keyDim, V = spec.valueDim, HV = spec.valueHeads;
  int64_t valueTiles = V / tileV;
  // An additive rule's bf16 split scan of 16-token chunks and 32 value
  // columns on eight warps is held to three CTAs an SM (80 registers, which
  // its loop fits without spills): at 100 it ran two, and gla's 384 CTAs of
  // tv32 at 1x8192x96 would not fit one wave of 132 SMs. Wider tiles, longer
  // chunks, f16 and f32 spill at 80, as do the delta and DPLR rules' scans
  // (ResourceUsageTest holds every default kernel to no spills).
  bool threeCTAs = kind == Kind::SplitScan && threads == 256 &&
                   tileV <= 32 && c == 16 && spec.dtype == DType::BF16 &&
                   spec.update == UpdateRule::Additive;
  // A kernel whose shared memory leaves room for one CTA an SM says so:
  // without a minimum, ptxas aims at an occupancy the shared memory cannot
  // give (rwkv7's f32 scan at 178 KB: 80 registers and 24 bytes of spills
  // in its loop, against 114 registers and none with the minimum of one).
  bool oneCTA = cuda::ctasBySharedMemory(layout.totalFloats * 4) < 2;
  bool asksForTwoCTAs = twoCTAs && !chunkParallel;
  int64_t ctasAsked = threeCTAs ? 3 : oneCTA ? 1 : asksForTwoCTAs ? 2 : 0;
  // The kernel that walks the chunks asks for what lina-occupancy recorded,
  // and so does a chunk-parallel kernel.
  if (walks) {
    chosenMinCTAs = ctasAsked;
    if (!choosePlacement)
      ctasAsked = minCTAs;
  } else if (chunkParallel) {
    printedParallel = true;
    chosenParallelMinCTAs = ctasAsked;
    if (!choosePlacement)
      ctasAsked = parallelMinCTAs;
  }
  printedMinCTAs = ctasAsked;
  // A backward's kernels read dL/do and write gradients (its prepare kernel
  // may load dL/do too).
  const char *gradParams = isBackward(kind) || isa<ChunkedBackwardOp>(op)
                               ? ", lina::GradParams d"
                               : "";
  if (asDeviceFunction)
    os << llvm::formatv("__device__ __forceinline__ void {0}(lina::Params "
                        "p{1}, const unsigned block) {{\n",
                        name, gradParams);
  else
    os << llvm::formatv("extern \"C\" __global__ void __launch_bounds__({0}{2}) "
                        "{1}(lina::Params p{3}) {{\n",
                        threads, name,
                        ctasAsked ? ", " + std::to_string(ctasAsked) : "",
                        gradParams);
  os << "  using namespace lina;\n"
        "  LINA_DYNAMIC_SHARED(float, smem);\n";
  os << llvm::formatv("  const int vt = {3} % {0};\n"
                      "  const int hv = ({3} / {0}) % {1};\n"
                      "  const i64 seq = {3} / ({0} * {1});\n"
                      "  const int kh = hv / {2};\n",
                      valueTiles, HV, HV / spec.heads, blockIndex());
  os << "  (void)kh;\n"
        "  i64 begin, end;\n"
        "  sequence_bounds(p, seq, begin, end);\n";
  // Offset of this CTA's state tile inside [N or slots, HV, K, V].
  auto stateAt = [&](const std::string &row) {
    return llvm::formatv("((({0}) * {1} + hv) * {2}) * {3} + vt * {4}", row,
                         HV, K, V, tileV)
        .str();
  };
  if (kind == Kind::BackwardStateGrads) {
    printBackwardScan(ops, stateAt);
    return sharedFloats * 4;
  }
  if (kind == Kind::Backward) {
    printBackwardChunks(ops, stateAt);
    return sharedFloats * 4;
  }
  if (chunkParallel) {
    // One CTA per (sequence, chunk): chunks past the sequence's end exit.
    os << llvm::formatv(
        "  const i64 chunk = blockIdx.y;\n"
        "  const i64 t0 = begin + chunk * {0};\n"
        "  if (t0 >= end) return;\n"
        "  const int n = (int)min((i64){0}, end - t0);\n"
        "  const i64 slot = chunk_slot(begin, seq, chunk, {0});\n"
        "  (void)slot;\n",
        c);
    if (kind == Kind::MaterializeOutput)
      os << llvm::formatv("  load_state<{0}, {1}>({2}, p.chunk_states + {3}, "
                          "{4});\n"
                          "  __syncthreads();\n",
                          K, tileV, buf(state), stateAt("slot"), V);
    os << "  {\n";
    hazards = {};
    for (Operation *inner : order)
      printOp(inner);
    landLoads();
    os << "  }\n}\n\n";
  } else {
    // The first chunk's copies are issued before the initial state's loads:
    // fewer registers are live at once (no prologue spills in ptxas's
    // allocation; linear attention's tv64 scan 121 -> 64 registers).
    if (!fetched.empty())
      printPrefetchSetup();
    if (registers)
      os << llvm::formatv(
          "  // The state lives in registers (StateRegisters.cuh).\n"
          "  reg_state<{0}, {1}> S;\n"
          "  S.load(p.initial_state ? p.initial_state + {2} : nullptr, {3});\n",
          K, tileV, stateAt("seq"), V);
    else
      os << llvm::formatv(
          "  load_state<{0}, {1}>({2}, p.initial_state ? p.initial_state + {3} "
          ": nullptr, {4});\n"
          "  __syncthreads();\n",
          K, tileV, buf(state), stateAt("seq"), V);
    os << llvm::formatv(
        "  for (i64 t0 = begin; t0 < end; t0 += {0}) {{\n"
        "    const int n = (int)min((i64){0}, end - t0);\n"
        "    const i64 slot = chunk_slot(begin, seq, (t0 - begin) / {0}, "
        "{0});\n"
        "    (void)slot;\n",
        c);
    // With prefetch every chunk starts with a barrier (its tiles landing).
    // With buffer rings it also orders the chunk's ops after the previous
    // chunk's; otherwise a barrier at the end of each chunk does.
    if (!fetched.empty())
      printPrefetchLanding();
    if (materializeStates && registers)
      os << llvm::formatv("    S.store({0} + {1}, {2});\n",
                          chunkStates("p.chunk_states"), stateAt("slot"), V);
    else if (materializeStates)
      os << llvm::formatv(
          "    store_state<{0}, {1}>({2} + {3}, {4}, {5});\n", K, tileV,
          chunkStates("p.chunk_states"), stateAt("slot"), buf(state), V);
    hazards = {};
    if (materializeStates && !registers)
      hazards.reads.push_back(range(state));
    for (Operation *inner : ops)
      printOp(inner);
    if (doubled.empty())
      barrier(); // the next chunk's first ops overwrite what these read
    else
      os << llvm::formatv("    ring = ring == {0} ? 0 : ring + {1};\n",
                          (buffers - 1) * copyStride, copyStride);
    os << "  }\n";
    if (registers)
      os << llvm::formatv("  if (p.final_state)\n"
                          "    S.store(p.final_state + {0}, {1});\n}\n\n",
                          stateAt("seq"), V);
    else
      os << llvm::formatv("{5}"
                          "  if (p.final_state)\n"
                          "    store_state<{0}, {1}>(p.final_state + {2}, {3}, "
                          "{4});\n}\n\n",
                          K, tileV, stateAt("seq"), buf(state), V,
                          // The last chunk's state, written by every thread,
                          // has no barrier of a next chunk to order it.
                          doubled.empty() ? "" : "  __syncthreads();\n");
  }
  return layout.totalFloats * 4;
}

void KernelPrinter::printBackwardScan(
    const llvm::SetVector<Operation *> &ops,
    llvm::function_ref<std::string(const std::string &)> stateAt) {
  int64_t K = spec.keyDim, V = spec.valueDim;
  Value grad = carried();
  if (spillFloats > 0)
    os << llvm::formatv("  float *spill = d.spill + (i64){1} * {0};\n",
                        spillFloats, blockIndex());
  os << llvm::formatv("  const i64 chunks = (end - begin + {0} - 1) / {0};\n",
                      c);
  // The last chunk's copies are issued before the gradient's loads, as the
  // forward scan's first chunk's are.
  if (!fetched.empty())
    printPrefetchSetup();
  // The state's gradient starts as dL/d(final state), or zero.
  if (registers)
    os << llvm::formatv("  // The state's gradient lives in registers "
                        "(StateRegisters.cuh).\n"
                        "  reg_state<{0}, {1}> S;\n"
                        "  S.load(d.dht ? d.dht + {2} : nullptr, {3});\n",
                        K, tileV, stateAt("seq"), V);
  else
    os << llvm::formatv("  load_state<{0}, {1}>({2}, d.dht ? d.dht + {3} : "
                        "nullptr, {4});\n"
                        "  __syncthreads();\n",
                        K, tileV, buf(grad), stateAt("seq"), V);
  os << llvm::formatv(
      "  for (i64 chunk = chunks - 1; chunk >= 0; --chunk) {{\n"
      "    const i64 t0 = begin + chunk * {0};\n"
      "    const int n = (int)min((i64){0}, end - t0);\n"
      "    const i64 slot = chunk_slot(begin, seq, chunk, {0});\n",
      c);
  if (!fetched.empty())
    printPrefetchLanding();
  // The gradient this chunk starts from, for the chunk-parallel kernel.
  hazards = {};
  if (registers) {
    os << llvm::formatv("    S.store({0} + {1}, {2});\n",
                        chunkStates("d.chunk_grads"), stateAt("slot"), V);
  } else {
    os << llvm::formatv("    store_state<{0}, {1}>({2} + {3}, {4}, {5});\n", K,
                        tileV, chunkStates("d.chunk_grads"), stateAt("slot"),
                        buf(grad), V);
    hazards.reads.push_back(range(grad));
  }
  for (Operation *inner : ops)
    printOp(inner);
  if (doubled.empty())
    barrier(); // the next chunk's first ops overwrite what these read
  else
    os << llvm::formatv("    ring = ring == {0} ? 0 : ring + {1};\n",
                        (buffers - 1) * copyStride, copyStride);
  os << "  }\n";
  if (registers)
    os << llvm::formatv("  if (d.dh0)\n"
                        "    S.store(d.dh0 + {0}, {1});\n}\n\n",
                        stateAt("seq"), V);
  else
    os << llvm::formatv(
        "{5}"
        "  if (d.dh0)\n"
        "    store_state<{0}, {1}>(d.dh0 + {2}, {3}, {4});\n}\n\n",
        K, tileV, stateAt("seq"), buf(grad), V,
        // The first chunk's gradient, written by every thread, has no
        // barrier of a next chunk to order it.
        doubled.empty() ? "" : "  __syncthreads();\n");
}

void KernelPrinter::printBackwardChunks(
    const llvm::SetVector<Operation *> &ops,
    llvm::function_ref<std::string(const std::string &)> stateAt) {
  int64_t K = spec.keyDim, V = spec.valueDim;
  Value start = body().getArgument(0), grad = carried();
  // Each CTA's spill region is its own for the kernel's whole run: the
  // launcher bounds the grid (BackwardPlan::chunkRows) and the CTAs walk
  // the chunks gridDim.y apart.
  if (spillFloats > 0)
    os << llvm::formatv("  float *spill = d.spill + ((i64)blockIdx.y * "
                        "gridDim.x + blockIdx.x) * {0};\n",
                        spillFloats);
  os << llvm::formatv(
      "  const i64 chunks = (end - begin + {0} - 1) / {0};\n"
      "  for (i64 chunk = blockIdx.y; chunk < chunks; chunk += gridDim.y) {{\n"
      "    const i64 t0 = begin + chunk * {0};\n"
      "    const int n = (int)min((i64){0}, end - t0);\n"
      "    const i64 slot = chunk_slot(begin, seq, chunk, {0});\n",
      c);
  hazards = {};
  // The chunk's starting state, as the forward's scan wrote it, and the
  // gradient of its last state, as the reverse scan wrote it.
  for (auto [value, from] : {std::pair{start, "p.chunk_states"},
                             std::pair{grad, "d.chunk_grads"}}) {
    if (!layout.offset.count(value))
      continue;
    // A packed state's copies land with the chunk's tile loads.
    bool landsLater = defersLoads() && shape(value).packed;
    os << llvm::formatv("    load_state<{0}, {1}{6}>({2}, {3} + {4}, {5});\n",
                        K, tileV, buf(value), chunkStates(from),
                        stateAt("slot"), V, landsLater ? ", false" : "");
    copiesPending |= landsLater;
    hazards.writes.push_back(range(value));
  }
  for (Operation *inner : ops)
    printOp(inner);
  barrier(); // the next chunk's first ops overwrite what these read
  os << "  }\n}\n\n";
}

/// Empty where `shared` bytes fit a CTA; else why not, naming the fix.
std::string sharedMemoryRefusal(const char *what, int64_t shared) {
  if (shared <= kMaxSharedBytes)
    return "";
  return llvm::formatv("the {0} needs {1} bytes of shared memory, more than "
                       "the {2} a CTA can have: use a smaller chunk size or "
                       "tile-v",
                       what, shared, kMaxSharedBytes)
      .str();
}

/// Prints `op`'s kernels. With `chosen`, the fetch ring and the CTAs an SM
/// of the kernel that walks the chunks are chosen from the schedule (and
/// left there) instead of read from the op's placement; with `chosenRows`,
/// the prepare kernel's row passes (by op) instead of read from the ops'
/// `lina.row_pass` (with either, neither is checked against the records).
Expected<KernelPlan>
emitChunked(ChunkedOp op, cuda::WalkingKernelChoice *chosen,
            llvm::DenseMap<Operation *, int64_t> *chosenRows = nullptr) {
  auto fail = [](const std::string &message) {
    return Expected<KernelPlan>(
        Status::error(StatusCode::InvalidArgument, message));
  };
  KernelPlan plan;
  plan.spec = toSpec(op.getSpec());
  plan.chunkSize = op.getChunkSize();
  ScheduleAttr schedule = cuda::scheduleOf(op, plan.spec);
  plan.tileV = schedule.getTileV();
  plan.threads = 32 * schedule.getWarps();
  plan.strategy = schedule.getStrategy() == ir::Strategy::materialize
                      ? Strategy::Materialize
                  : schedule.getStrategy() == ir::Strategy::split
                      ? Strategy::Split
                      : Strategy::FusedScan;
  if (plan.spec.valueDim % plan.tileV != 0)
    return fail("tile-v must divide value_dim");

  llvm::DenseMap<Value, cuda::TileShape> shapes;
  std::string error;
  if (!cuda::computeShapes(op, plan.tileV, shapes, error))
    return fail(error);

  std::string source;
  llvm::raw_string_ostream os(source);
  os << "// Generated by lina. Do not edit.\n// spec: " << op.getSpec()
     << "\n// chunk size " << plan.chunkSize << ", tile-v " << plan.tileV
     << ", " << plan.threads << " threads, strategy "
     << toString(plan.strategy)
     << (schedule.getPrefetch() ? ", prefetch" : "") << "\n\n"
     << "#define LINA_THREADS " << plan.threads << "\n"
     // f16 operands for an f16 spec's tensor-core products (Prelude.cuh's
     // mma_t): bf16 would keep 8 of its 11 significant bits.
     << (plan.spec.dtype == DType::F16 ? "#define LINA_MMA_F16 1\n" : "")
     << (schedule.getSegments() > 1
             ? "#define LINA_SEGMENTS 1\n#define LINA_CHUNK_SIZE " +
                   std::to_string(plan.chunkSize) + "\n"
             : "")
     << cuda::preludeSource() << "\n";
  using Kind = KernelPrinter::Kind;
  KernelPrinter printer(op, plan.spec, plan.tileV, shapes, os);
  printer.prefetch = schedule.getPrefetch();
  printer.choosePlacement = chosen != nullptr;
  printer.fetchRing = fetchRingOf(op);
  printer.minCTAs = placementOf(op).getMinCtas();
  printer.parallelMinCTAs = placementOf(op).getParallelMinCtas();
  printer.stateInRegisters = stateInRegisters(op);
  printer.mmaDecay = !schedule.getDirectDecay();
  printer.twoCTAs = schedule.getTwoCtas();
  Block &body = op.getBody().front();
  SmallVector<Operation *> all;
  for (Operation &inner : body)
    all.push_back(&inner);
  // Whether a generated prepare kernel checked the ops' row passes.
  bool rowsPrinted = false;
  if (schedule.getMma() == ir::Mma::warpgroup) {
    if (plan.strategy != Strategy::FusedScan)
      return fail("mma warpgroup: the strategy must be fused (got " +
                  std::string(toString(plan.strategy)) + ")");
    std::string refusal = cuda::wgmmaScanRefusal(plan.spec, plan.chunkSize,
                                                 plan.tileV, plan.threads);
    if (!refusal.empty())
      return fail(refusal);
    plan.needsSm90a = true;
    const int64_t segments = schedule.getSegments();
    // The records lina-warpgroup-roles made are read, and checked, unless
    // this print only chooses a placement, before that pass ran.
    const bool checkRecords = chosen == nullptr && chosenRows == nullptr;
    // The additive rules' scan into plan.scanKernel, printed from the ops,
    // whole or (with `cut`) storing segment records. False with `error`
    // where printing fails.
    auto printAdditiveScan = [&](const cuda::SegmentCut *cut) {
      int64_t shared =
          cuda::printWarpgroupScan(os, op, plan.spec, plan.scanKernel, error,
                                   checkRecords, /*segments=*/cut != nullptr);
      if (shared < 0)
        return false;
      plan.scanSharedBytes = shared;
      return true;
    };
    if (wgmmaScanPreparesChunks(plan.spec)) {
      // Each chunk is prepared first, chunk-parallel, into the workspace
      // (the delta and DPLR rules' solves, a per-channel decay's scaled
      // operands): the split strategy's two kernels, both printed from the
      // ops (lina-warpgroup-roles' records), the prepare kernel's record
      // holding the values lina-warpgroup-record put there.
      if (segments > 1)
        return fail("segments: the wgmma scan runs in segments only for the "
                    "additive rule with at most a scalar decay (got " +
                    std::string(toString(plan.spec.update)) + " with " +
                    toString(plan.spec.decay) +
                    " decay); plan whole sequences (segments 1) or with mma "
                    "warp");
      plan.strategy = Strategy::Split;
      plan.prepareKernel = "lina_chunk_prepare";
      plan.scanKernel = "lina_chunk_split_scan";
      int64_t recordFloats = 0;
      int64_t prepareShared =
          cuda::printWarpgroupPrepare(os, op, plan.spec, plan.prepareKernel,
                                      error, recordFloats, checkRecords);
      if (prepareShared < 0)
        return fail(error);
      int64_t scanShared = cuda::printWarpgroupScan(
          os, op, plan.spec, plan.scanKernel, error, checkRecords);
      if (scanShared < 0)
        return fail(error);
      plan.prepareSharedBytes = prepareShared;
      plan.scanSharedBytes = scanShared;
      plan.chunkDataFloats = recordFloats;
    } else if (segments > 1) {
      // Pieces scanned at once: the scan also stores each chunk's X and
      // decay (wgmmaSegmentCut's segment record), which the split strategy's
      // combine and carry kernels read; the plan is theirs, split.
      if (!canRunInSegments(plan.spec))
        return fail("segments: the wgmma scan runs in segments only with a "
                    "decay (got none)");
      plan.strategy = Strategy::Split;
      plan.segments = segments;
      plan.scanKernel = "lina_chunk_split_scan";
      cuda::SegmentCut cut = cuda::wgmmaSegmentCut(plan.spec.keyDim);
      if (!printAdditiveScan(&cut))
        return fail(error);
      plan.chunkDataFloats = cuda::wgmmaSegmentRecordFloats(plan.spec.keyDim);
      plan.combineKernel = "lina_segment_combine";
      plan.carryKernel = "lina_segment_carry";
      plan.segmentGateColumns = cut.gateColumns;
      plan.carrySharedBytes = cuda::printSegmentKernels(
          os, plan.spec, plan.chunkSize, plan.threads, cut,
          plan.chunkDataFloats, plan.combineKernel, plan.carryKernel);
    } else {
      // Whole sequences.
      plan.scanKernel = "lina_chunk_fused";
      if (!printAdditiveScan(nullptr))
        return fail(error);
    }
  } else if (plan.strategy == Strategy::FusedScan) {
    plan.scanKernel = "lina_chunk_fused";
    plan.scanSharedBytes = printer.print(
        plan.scanKernel, cuda::backwardSlice(op, all), Kind::Fused,
        plan.threads);
  } else if (plan.strategy == Strategy::Split) {
    // The prepare kernel spans all value columns, so the key-side work of a
    // chunk runs once, not once per value tile.
    llvm::DenseMap<Value, cuda::TileShape> fullShapes;
    if (!cuda::computeShapes(op, plan.spec.valueDim, fullShapes, error))
      return fail(error);
    cuda::StateSplit split = cuda::splitAtState(op, fullShapes,
                                                plan.spec.dtype != DType::F32);
    plan.chunkDataFloats = split.recordFloats;
    if (!split.prepareOps.empty()) {
      plan.prepareKernel = "lina_chunk_prepare";
      KernelPrinter preparer(op, plan.spec, plan.spec.valueDim, fullShapes,
                             os);
      preparer.mmaDecay = printer.mmaDecay;
      preparer.choosePlacement = printer.choosePlacement;
      preparer.parallelMinCTAs = printer.parallelMinCTAs;
      // Choosing anything, the emitter reads no record a later pass makes:
      // the row passes are planned, not checked.
      preparer.chooseRows = chosen != nullptr || chosenRows != nullptr;
      plan.prepareSharedBytes =
          preparer.print(plan.prepareKernel, split.prepareOps, Kind::Prepare,
                         plan.threads, &split);
      rowsPrinted = true;
      printer.printedParallel = true;
      printer.chosenParallelMinCTAs = preparer.chosenParallelMinCTAs;
      if (chosenRows)
        *chosenRows = preparer.chosenRowPasses;
      if (!preparer.refusal.empty())
        return fail(preparer.refusal);
    }
    plan.scanKernel = "lina_chunk_split_scan";
    plan.scanSharedBytes = printer.print(plan.scanKernel, split.scanOps,
                                         Kind::SplitScan, plan.threads, &split);
    plan.segments = schedule.getSegments();
    if (plan.segments > 1) {
      std::string why;
      std::optional<cuda::SegmentCut> cut = cuda::segmentCut(op, split, why);
      if (!cut)
        return fail("segments: " + why);
      // The carry holds its share of the start state in registers, and the
      // combine every piece's run decays in shared memory (16 x 256 fit).
      if (plan.spec.keyDim > 256 || plan.spec.valueDim > 256)
        return fail("segments: key_dim and value_dim must be at most 256 (got " +
                    std::to_string(plan.spec.keyDim) + " and " +
                    std::to_string(plan.spec.valueDim) + ")");
      plan.combineKernel = "lina_segment_combine";
      plan.carryKernel = "lina_segment_carry";
      plan.segmentGateColumns = cut->gateColumns;
      plan.carrySharedBytes = cuda::printSegmentKernels(
          os, plan.spec, plan.chunkSize, plan.threads, *cut,
          split.recordFloats, plan.combineKernel, plan.carryKernel);
    }
  } else {
    plan.scanKernel = "lina_chunk_scan";
    plan.outputKernel = "lina_chunk_output";
    plan.scanSharedBytes = printer.print(
        plan.scanKernel, cuda::backwardSlice(op, {body.getTerminator()}),
        Kind::MaterializeScan, plan.threads);
    SmallVector<Operation *> stores;
    for (StoreOp store : body.getOps<StoreOp>())
      stores.push_back(store);
    plan.outputSharedBytes =
        printer.print(plan.outputKernel, cuda::backwardSlice(op, stores),
                      Kind::MaterializeOutput, plan.threads);
  }
  if (chosen)
    *chosen = {printer.chosenRing, printer.chosenMinCTAs,
               printer.chosenParallelMinCTAs};
  if (!printer.refusal.empty())
    return fail(printer.refusal);
  if (!chosen && !printer.printedParallel && printer.parallelMinCTAs != 0)
    return fail(llvm::formatv("placement <parallel_min_ctas = {0}>, but this "
                              "schedule runs no generated chunk-parallel "
                              "kernel (run -lina-occupancy)",
                              printer.parallelMinCTAs)
                    .str());
  // Row passes are the split strategy's prepare kernel's: a record on a
  // chunk printed without one was made for another schedule.
  if (!rowsPrinted && !chosen && !chosenRows)
    for (Operation *inner : all)
      if (inner->hasAttr(kRowPassAttr))
        return fail(llvm::formatv("'{0}' records lina.row_pass, but this "
                                  "schedule runs no prepare kernel of row "
                                  "passes (run -lina-row-passes to plan "
                                  "them)",
                                  inner->getName().getStringRef())
                        .str());
  int64_t shared =
      std::max<int64_t>({plan.scanSharedBytes, plan.outputSharedBytes,
                         plan.prepareSharedBytes, plan.carrySharedBytes});
  if (std::string why = sharedMemoryRefusal("kernel", shared); !why.empty())
    return fail(why);
  plan.source = std::move(source);
  return plan;
}

} // namespace

Expected<KernelPlan> emitCuda(ModuleOp module) {
  auto chunkedOps = module.getOps<ChunkedOp>();
  if (std::distance(chunkedOps.begin(), chunkedOps.end()) != 1)
    return Status::error(StatusCode::InvalidArgument,
                         "the module must hold exactly one lina.chunked (run "
                         "-lina-chunk first)");
  return emitChunked(*chunkedOps.begin(), nullptr);
}

/// Whether a backward keeps its chunk states in bf16: BackwardPlan's rule,
/// one for the kernels, the passes' plans of them and the workspace.
static bool keepsBf16ChunkStates(const Spec &spec) {
  BackwardPlan rule;
  rule.spec = spec;
  return rule.chunkStateBytes() == 2;
}

namespace {
/// What the backward's kernels are printed from: the tiles' shapes of the
/// module's lina.chunked and lina.chunked_backward at the schedule's value
/// tile and at whole heads (the prepare kernels span every value column,
/// so that the key-side work runs once a chunk), and the split
/// lina-cut-state's record makes of each: the chunk's state-independent
/// work goes to two chunk-parallel prepare kernels, into one record a
/// (chunk slot, value head), the states scan's values first.
struct BackwardParts {
  llvm::DenseMap<Value, cuda::TileShape> forwardShapes, backwardShapes,
      forwardFull, backwardFull;
  cuda::StateSplit statesSplit, gradsSplit;
};
} // namespace

/// Fills `parts`; the problem where a shape cannot be computed, else "".
static std::string makeBackwardParts(ChunkedOp forward,
                                     ChunkedBackwardOp backward,
                                     const Spec &spec, int64_t tileV,
                                     BackwardParts &parts) {
  Block &forwardBody = forward.getBody().front();
  Block &backwardBody = backward.getBody().front();
  std::string error;
  if (!cuda::computeShapes(forwardBody, tileV, parts.forwardShapes, error) ||
      !cuda::computeShapes(backwardBody, tileV, parts.backwardShapes, error) ||
      !cuda::computeShapes(forwardBody, spec.valueDim, parts.forwardFull,
                           error) ||
      !cuda::computeShapes(backwardBody, spec.valueDim, parts.backwardFull,
                           error))
    return error;
  parts.statesSplit = cuda::walkSplit(forwardBody, forwardBody.getArgument(0),
                                      parts.forwardFull, spec);
  parts.gradsSplit =
      cuda::walkSplit(backwardBody, backwardBody.getArguments().back(),
                      parts.backwardFull, spec);
  cuda::shareRecord(parts.statesSplit, parts.gradsSplit);
  return "";
}

/// The backward's states scan: the forward's scan, its outputs left out
/// (the materialize strategy's first kernel), a device function of the
/// scans' launch, fetching ahead in the ring lina-pipeline-loads gave the
/// lina.chunked.
static void setUpStatesScan(KernelPrinter &states, ChunkedOp forward,
                            const Spec &spec) {
  states.mmaDecay = true;
  states.asDeviceFunction = true;
  states.stateInRegisters = stateInRegisters(forward);
  // One rule for the kernels and the workspace's size.
  states.bf16ChunkStates = keepsBf16ChunkStates(spec);
  states.fetchRing = fetchRingOf(forward);
}

/// The backward's reverse scan, the other device function of that launch,
/// fetching ahead in the lina.chunked_backward's ring.
static void setUpReverseScan(KernelPrinter &printer, ChunkedBackwardOp backward,
                             const Spec &spec) {
  printer.bf16ChunkStates = keepsBf16ChunkStates(spec);
  printer.asDeviceFunction = true;
  printer.stateInRegisters = stateInRegisters(backward);
  printer.fetchRing = fetchRingOf(backward);
}

namespace cuda {
std::optional<WalkingKernelChoice> chooseWalkingKernel(ChunkedOp op) {
  WalkingKernelChoice choice;
  if (!emitChunked(op, &choice).ok())
    return std::nullopt;
  return choice;
}

llvm::DenseMap<Operation *, int64_t> chooseRowPasses(ChunkedOp op) {
  // The passes of a prepare kernel printed before the chunk failed (its
  // shared memory, its segments) are recorded all the same, so that
  // printing it names that failure, not a missing record.
  WalkingKernelChoice walking;
  llvm::DenseMap<Operation *, int64_t> rows;
  (void)emitChunked(op, &walking, &rows);
  return rows;
}

/// The gradients kernel's split as emitCudaBackward makes it, for the
/// passes' plans, from the reverse scan's `grads` and, where the module
/// holds `op`'s lina.chunked, the states scan's split. (Its offsets are not
/// the record's: the plans read only which values the kernel loads.)
static StateSplit
plannedGradientsSplit(ChunkedBackwardOp op, const Spec &spec,
                      const llvm::DenseMap<Value, TileShape> &fullShapes,
                      const StateSplit &grads) {
  Block &body = op.getBody().front();
  std::optional<StateSplit> states;
  if (auto module = op->getParentOfType<ModuleOp>())
    for (ChunkedOp forward : module.getOps<ChunkedOp>()) {
      Block &forwardBody = forward.getBody().front();
      llvm::DenseMap<Value, TileShape> forwardFull;
      std::string error;
      if (forward.getSpec() == op.getSpec() &&
          computeShapes(forwardBody, spec.valueDim, forwardFull, error))
        states = walkSplit(forwardBody, forwardBody.getArgument(0), forwardFull,
                           spec);
      break;
    }
  return gradientsSplit(body, grads, states ? &*states : nullptr,
                        accumulates(body), fullShapes);
}

/// The same from `op` alone, the reverse scan's split made here; nullopt
/// where `op`'s shapes cannot be computed.
static std::optional<StateSplit> plannedGradientsSplit(ChunkedBackwardOp op,
                                                       const Spec &spec) {
  Block &body = op.getBody().front();
  llvm::DenseMap<Value, TileShape> fullShapes;
  std::string error;
  if (!computeShapes(body, spec.valueDim, fullShapes, error))
    return std::nullopt;
  return plannedGradientsSplit(
      op, spec, fullShapes,
      walkSplit(body, body.getArguments().back(), fullShapes, spec));
}

/// Runs `use` on a printer of `op`'s backward kernels that prints into
/// nothing, with the kernels' thread count: the passes' plans of what
/// emitCudaBackward will print. Nothing runs where the op's layout cannot
/// be printed (the emitter names the problem when asked to print).
template <typename Use>
static void withBackwardPrinter(ChunkedBackwardOp op, Use use) {
  Spec spec = toSpec(op.getSpec());
  ScheduleAttr schedule = scheduleOf(op, spec);
  llvm::DenseMap<Value, TileShape> shapes;
  std::string error;
  if (schedule.getTileV() <= 0 || spec.valueDim % schedule.getTileV() != 0 ||
      !computeShapes(op.getBody().front(), schedule.getTileV(), shapes, error))
    return;
  std::string discarded;
  llvm::raw_string_ostream os(discarded);
  KernelPrinter printer(op, op.getChunkSize(), spec, schedule.getTileV(),
                        shapes, os);
  // Set up as emitCudaBackward's printer of the reverse scan, which then
  // prints the gradients kernel (its ring applies to the scan alone).
  setUpReverseScan(printer, op, spec);
  use(printer, 32 * schedule.getWarps());
}

llvm::DenseMap<Operation *, llvm::SmallVector<llvm::StringRef, 2>>
chooseBackwardGlobalTiles(ChunkedBackwardOp op) {
  llvm::DenseMap<Operation *, llvm::SmallVector<llvm::StringRef, 2>> chosen;
  Spec spec = toSpec(op.getSpec());
  // What each of the two kernels keeps in global memory.
  withBackwardPrinter(op, [&](KernelPrinter &printer, int64_t threads) {
    printer.chooseGlobal = true;
    Block &body = op.getBody().front();
    using Kind = KernelPrinter::Kind;
    // The reverse scan as emitCudaBackward prints it: loading what its
    // prepare kernel stores.
    llvm::DenseMap<Value, TileShape> fullShapes;
    std::string error;
    if (!computeShapes(body, spec.valueDim, fullShapes, error))
      return;
    StateSplit split =
        walkSplit(body, body.getArguments().back(), fullShapes, spec);
    printer.print("chosen", split.scanOps, Kind::BackwardStateGrads, threads,
                  &split);
    for (Operation *inner : printer.chosenGlobal)
      chosen[inner].push_back("scan");
    StateSplit chunks = plannedGradientsSplit(op, spec, fullShapes, split);
    printer.print("chosen", chunks.scanOps, Kind::Backward, threads, &chunks);
    for (Operation *inner : printer.chosenGlobal)
      chosen[inner].push_back("chunks");
  });
  return chosen;
}

BackwardScanRings chooseBackwardScanRings(ChunkedBackwardOp op) {
  BackwardScanRings rings;
  auto module = op->getParentOfType<ModuleOp>();
  if (!module)
    return rings;
  auto forwards = module.getOps<ChunkedOp>();
  if (std::distance(forwards.begin(), forwards.end()) != 1)
    return rings;
  ChunkedOp forward = *forwards.begin();
  Spec spec = toSpec(op.getSpec());
  ScheduleAttr schedule = scheduleOf(op, spec);
  BackwardParts parts;
  if (forward.getSpec() != op.getSpec() || schedule.getTileV() <= 0 ||
      spec.valueDim % schedule.getTileV() != 0 ||
      !makeBackwardParts(forward, op, spec, schedule.getTileV(), parts).empty())
    return rings;
  int64_t threads = 32 * schedule.getWarps();
  std::string discarded;
  llvm::raw_string_ostream os(discarded);
  using Kind = KernelPrinter::Kind;
  // Each scan as emitCudaBackward prints it, choosing the ring its layout
  // affords (none where a printer refuses: the emitter names why).
  auto ringOf = [&](KernelPrinter &scan, const StateSplit &split, Kind kind) {
    scan.choosePlacement = scan.prefetch = true;
    scan.print("chosen", split.scanOps, kind, threads, &split);
    return scan.refusal.empty() ? scan.chosenRing : 0;
  };
  KernelPrinter states(forward, spec, schedule.getTileV(), parts.forwardShapes,
                       os);
  setUpStatesScan(states, forward, spec);
  rings.states = ringOf(states, parts.statesSplit, Kind::MaterializeScan);
  KernelPrinter reverse(op, op.getChunkSize(), spec, schedule.getTileV(),
                        parts.backwardShapes, os);
  setUpReverseScan(reverse, op, spec);
  rings.stateGrads =
      ringOf(reverse, parts.gradsSplit, Kind::BackwardStateGrads);
  return rings;
}

llvm::DenseMap<Operation *, int64_t>
chooseBarrierIntervals(ChunkedBackwardOp op, int64_t window) {
  llvm::DenseMap<Operation *, int64_t> chosen;
  Spec spec = toSpec(op.getSpec());
  ScheduleAttr schedule = scheduleOf(op, spec);
  if (schedule.getTileV() <= 0 || spec.valueDim % schedule.getTileV() != 0)
    return chosen;
  std::optional<StateSplit> chunks = plannedGradientsSplit(op, spec);
  if (!chunks)
    return chosen;
  return groupIndependentOps(chunks->scanOps, window, chunks->stored);
}

PackedTiles choosePackedTiles(ChunkedBackwardOp op) {
  PackedTiles chosen;
  Spec spec = toSpec(op.getSpec());
  // The states and loaded tiles the gradients kernel keeps packed.
  withBackwardPrinter(op, [&](KernelPrinter &printer, int64_t threads) {
    printer.choosePacked = true;
    // The gradients kernel as emitCudaBackward prints it: loading what the
    // prepare kernels' record holds.
    std::optional<StateSplit> chunks = plannedGradientsSplit(op, spec);
    if (!chunks)
      return;
    // Packed loads take half the shared memory, but the first-fit layout
    // is not monotone: where packing them would put more of the kernel's
    // tiles in global memory (kda's at 16-token chunks), they stay fp32.
    printer.chooseGlobal = true;
    auto plan = [&](bool loads) {
      printer.packLoads = loads;
      printer.print("chosen", chunks->scanOps, KernelPrinter::Kind::Backward,
                    threads, &*chunks);
      return std::make_pair(
          PackedTiles{printer.chosenPackedStates, printer.chosenPackedLoads},
          printer.spillFloats);
    };
    auto [withLoads, spillWith] = plan(true);
    auto [without, spillWithout] = plan(false);
    chosen = spillWith <= spillWithout ? withLoads : without;
  });
  return chosen;
}
} // namespace cuda

} // namespace lina

namespace lina {

Expected<BackwardPlan> emitCudaBackward(ModuleOp module) {
  auto fail = [](const std::string &message) {
    return Expected<BackwardPlan>(
        Status::error(StatusCode::InvalidArgument, message));
  };
  auto forwards = module.getOps<ChunkedOp>();
  auto backwards = module.getOps<ChunkedBackwardOp>();
  if (std::distance(forwards.begin(), forwards.end()) != 1 ||
      std::distance(backwards.begin(), backwards.end()) != 1)
    return fail("the module must hold one lina.chunked and its "
                "lina.chunked_backward (run -lina-chunk and "
                "-lina-chunk-backward first)");
  ChunkedOp forward = *forwards.begin();
  ChunkedBackwardOp backward = *backwards.begin();
  if (forward.getSpec() != backward.getSpec() ||
      forward.getChunkSize() != backward.getChunkSize())
    return fail("the lina.chunked_backward is not the lina.chunked's");
  BackwardPlan plan;
  plan.spec = toSpec(backward.getSpec());
  plan.chunkSize = backward.getChunkSize();
  ScheduleAttr schedule = cuda::scheduleOf(backward, plan.spec);
  plan.tileV = schedule.getTileV();
  plan.threads = 32 * schedule.getWarps();
  if (plan.spec.valueDim % plan.tileV != 0)
    return fail("tile-v must divide value_dim");
  Block &backwardBody = backward.getBody().front();
  for (SumOp sum : backwardBody.getOps<SumOp>())
    if (!secondFactorMask(sum))
      return fail("a lina.sum's product term has a factor past its 64th "
                  "tile; the kernels mark product factors in 64 bits: "
                  "write that product as a lina.mul");
  BackwardParts parts;
  if (std::string error =
          makeBackwardParts(forward, backward, plan.spec, plan.tileV, parts);
      !error.empty())
    return fail(error);

  std::string source;
  llvm::raw_string_ostream os(source);
  os << "// Generated by lina. Do not edit.\n// spec: " << backward.getSpec()
     << "\n// backward: chunk size " << plan.chunkSize << ", tile-v "
     << plan.tileV << ", " << plan.threads << " threads\n\n"
     << "#define LINA_THREADS " << plan.threads << "\n"
     << (plan.spec.dtype == DType::F16 ? "#define LINA_MMA_F16 1\n" : "")
     << cuda::preludeSource() << "\n";
  using Kind = KernelPrinter::Kind;
  // Only the state's gradient is carried from chunk to chunk: the reverse
  // scan runs what its update needs, writing the gradient each chunk starts
  // from; every chunk's gradients then come at once, a CTA a chunk, from
  // the two written states (as fla's backward: dh's scan, then the
  // chunk-parallel dq, dk, dv). The recurrence is linear in the state, so
  // that update never reads the state: the reverse scan and the forward's
  // scan, which writes the state before every chunk, run side by side.
  llvm::SetVector<Operation *> gradScan =
      cuda::backwardSlice(backwardBody, {backwardBody.getTerminator()});
  Value startState = backwardBody.getArgument(0);
  for (Operation *inner : gradScan)
    if (llvm::is_contained(inner->getOperands(), startState))
      return fail("'" + inner->getName().getStringRef().str() +
                  "' makes the state's gradient depend on the state, which "
                  "a linear recurrence's cannot: the backward's derivation "
                  "is wrong (please report it)");
  const cuda::StateSplit &statesSplit = parts.statesSplit;
  const cuda::StateSplit &gradsSplit = parts.gradsSplit;
  plan.recordFloats = gradsSplit.recordFloats;
  auto printPrepare = [&](KernelPrinter &preparer, const std::string &name,
                          const cuda::StateSplit &split) -> std::string {
    if (split.prepareOps.empty())
      return "";
    preparer.mmaDecay = true;
    preparer.rowPasses = false;
    preparer.loadsTogether = true;
    unsigned bytes = preparer.print(name, split.prepareOps, Kind::Prepare,
                                    plan.threads, &split);
    plan.prepares.push_back(
        {name, bytes,
         isa<ChunkedBackwardOp>(split.prepareOps.front()->getParentOp())});
    return preparer.refusal;
  };
  KernelPrinter statesPreparer(forward, plan.spec, plan.spec.valueDim,
                               parts.forwardFull, os);
  if (std::string why = printPrepare(
          statesPreparer, "lina_backward_states_prepare", statesSplit);
      !why.empty())
    return fail(why);
  KernelPrinter gradsPreparer(backward, plan.chunkSize, plan.spec,
                              plan.spec.valueDim, parts.backwardFull, os);
  if (std::string why = printPrepare(gradsPreparer,
                                     "lina_backward_grads_prepare", gradsSplit);
      !why.empty())
    return fail(why);
  // The forward's scan, its outputs left out (the materialize strategy's
  // first kernel).
  KernelPrinter states(forward, plan.spec, plan.tileV, parts.forwardShapes, os);
  setUpStatesScan(states, forward, plan.spec);
  plan.statesSharedBytes =
      states.print(plan.statesKernel, statesSplit.scanOps,
                   Kind::MaterializeScan, plan.threads, &statesSplit);
  if (!states.refusal.empty())
    return fail(states.refusal);
  KernelPrinter printer(backward, plan.chunkSize, plan.spec, plan.tileV,
                        parts.backwardShapes, os);
  setUpReverseScan(printer, backward, plan.spec);
  plan.stateGradsSharedBytes =
      printer.print(plan.stateGradsKernel, gradsSplit.scanOps,
                    Kind::BackwardStateGrads, plan.threads, &gradsSplit);
  if (!printer.refusal.empty())
    return fail(printer.refusal);
  int64_t scanSpill = printer.spillFloats;
  int64_t scanMinCTAs =
      std::max(states.printedMinCTAs, printer.printedMinCTAs);
  // One launch of both: a CTA of each per (sequence, value head, value
  // tile), the reverse scan's first (it is the longer walk, so where the
  // grid is more than a wave it starts first). Where the grid fits the GPU
  // at once, the backward waits for the longer scan instead of both.
  os << llvm::formatv(
      "extern \"C\" __global__ void __launch_bounds__({0}{1}) {2}(lina::Params "
      "p, lina::GradParams d) {{\n"
      "  const unsigned ctas = gridDim.x / 2;\n"
      "  if (blockIdx.x < ctas)\n"
      "    {3}(p, d, blockIdx.x);\n"
      "  else\n"
      "    {4}(p, blockIdx.x - ctas);\n"
      "}\n"
      "LINA_KERNEL_ENTRY({2})\n\n",
      plan.threads, scanMinCTAs ? ", " + std::to_string(scanMinCTAs) : "",
      plan.scansKernel, plan.stateGradsKernel, plan.statesKernel);
  printer.asDeviceFunction = false;
  printer.fetchRing = 0;
  // The gradients kernel loads what the reverse scan's record holds of its
  // values instead of making them again.
  cuda::StateSplit chunksSplit =
      cuda::gradientsSplit(backwardBody, gradsSplit, &statesSplit,
                           accumulates(backwardBody), parts.backwardFull);
  if (std::string why =
          cuda::intervalRefusal(chunksSplit.scanOps, chunksSplit.stored);
      !why.empty())
    return fail(why);
  plan.backwardSharedBytes =
      printer.print(plan.backwardKernel, chunksSplit.scanOps, Kind::Backward,
                    plan.threads, &chunksSplit);
  if (!printer.refusal.empty())
    return fail(printer.refusal);
  plan.spillFloats = std::max(scanSpill, printer.spillFloats);
  // The gradients are sums the backward adds into: zeroed first.
  os << "extern \"C\" __global__ void " << plan.zeroKernel
     << "(float *p, lina::i64 n) {\n"
        "  for (lina::i64 i = blockIdx.x * (lina::i64)blockDim.x + "
        "threadIdx.x; i < n;\n"
        "       i += (lina::i64)gridDim.x * blockDim.x)\n"
        "    p[i] = 0.0f;\n}\n"
        "LINA_KERNEL_ENTRY("
     << plan.zeroKernel << ")\n";
  if (std::string why = sharedMemoryRefusal("backward", plan.sharedBytes());
      !why.empty())
    return fail(why);
  plan.source = std::move(source);
  return plan;
}

} // namespace lina
