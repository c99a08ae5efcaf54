//===- BackwardKernel.h - Launching generated backward kernels --*- C++ -*-===//
//
// Part of lina. The GPU half of training: the code generator prints the
// backward of a spec's chunkwise program (lina-chunk-backward's
// lina.chunked_backward) as two launches, and this runs them:
//   0. chunk-parallel prepare kernels, a CTA per (sequence, value head,
//      chunk): what each scan's chunk needs that does not depend on what
//      it carries (lina-cut-state's record), into a record per chunk;
//   1. two scans side by side in one grid, a CTA of each per (sequence,
//      value head, value tile): the forward's scan again, writing the state
//      before every chunk to a workspace (the materialize strategy's scan:
//      states are recomputed, not kept from the forward call, as fla does),
//      and the reverse scan, walking the chunks from the last to the first
//      with the state's gradient on chip, running only what that gradient's
//      update needs (which never reads the state: the recurrence is linear
//      in it), and writing the gradient each chunk starts from;
//   2. the gradients: a CTA per (sequence, value head, value tile, chunk),
//      from the chunk's two written states, adding the chunk's gradients
//      into fp32 buffers. Gradients of key-side inputs (q, k, g, beta, a,
//      b, the gate parameters) are sums over value tiles and over the value
//      heads of a key head, and the gate parameters' over chunks too, so
//      they are added atomically.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_RUNTIME_BACKWARDKERNEL_H
#define LINA_RUNTIME_BACKWARDKERNEL_H

#include "lina/Runtime/ChunkKernel.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace lina {

/// Everything the launcher needs, decided by the code generator.
struct BackwardPlan {
  /// The spec the kernels compute: the one lina-specialize made of the
  /// caller's.
  Spec spec;
  /// The caller's spec, as written (planBackwardKernel sets it): a call may
  /// pass every input it names, and then its gradient, also where `spec`
  /// does not read it; that gradient is zero (KernelPlan::written).
  std::optional<Spec> written;
  int64_t chunkSize = 32;
  int64_t tileV = 32; ///< value columns per CTA of every kernel
  int64_t threads = 128;
  std::string source; ///< CUDA C++, self-contained
  /// The forward scan that writes every chunk's starting state, and the
  /// reverse scan that writes the state's gradient before every chunk: two
  /// device functions of the CTA's index, run side by side by scansKernel
  /// (the reverse scan's CTAs, then the forward scan's), each in its shared
  /// bytes.
  std::string statesKernel = "lina_backward_states";
  unsigned statesSharedBytes = 0;
  std::string stateGradsKernel = "lina_backward_state_grads";
  unsigned stateGradsSharedBytes = 0;
  std::string scansKernel = "lina_backward_scans";
  unsigned scansSharedBytes() const {
    return std::max(statesSharedBytes, stateGradsSharedBytes);
  }
  /// The kernels that compute what the scans load, a CTA per (sequence,
  /// value head, chunk) over all value columns, run before them: the
  /// states scan's first (it takes lina::Params), then the reverse scan's
  /// (lina::Params and lina::GradParams). None where a scan loads nothing.
  struct Prepare {
    std::string kernel;
    unsigned sharedBytes = 0;
    bool gradParams = false;
  };
  std::vector<Prepare> prepares;
  /// fp32s of the record the prepare kernels write a (chunk slot, value
  /// head): both scans' stored values (p.chunk_data).
  int64_t recordFloats = 0;
  /// The chunk-parallel kernel that adds up the gradients.
  std::string backwardKernel = "lina_chunk_backward";
  unsigned backwardSharedBytes = 0;
  /// The most shared memory a CTA of any of the plan's launches takes.
  unsigned sharedBytes() const {
    unsigned bytes = std::max(scansSharedBytes(), backwardSharedBytes);
    for (const Prepare &prepare : prepares)
      bytes = std::max(bytes, prepare.sharedBytes);
    return bytes;
  }
  /// Zeroes an fp32 buffer: the gradients, before the backward adds to them.
  std::string zeroKernel = "lina_backward_zero";
  /// Floats a CTA of the backward keeps in global memory: the tiles its
  /// shared memory cannot hold (0 where all fit).
  int64_t spillFloats = 0;
  /// CTAs of the chunk-parallel kernel with spills, about: each needs a
  /// spill region of its own, so the grid walks the chunks rather than
  /// launching one CTA a chunk (those kernels run one CTA an SM).
  static constexpr int64_t kSpillingCTAs = 528;

  int64_t valueTiles() const { return spec.valueDim / tileV; }
  /// Bytes of one element of the chunk states and their gradients in the
  /// workspace: bf16 for bf16 specs (the emitter's bf16ChunkStates), fp32
  /// otherwise.
  int64_t chunkStateBytes() const {
    return spec.dtype == DType::BF16 ? 2 : 4;
  }
  /// Chunk slots of a call, as KernelPlan::workspaceSlots.
  int64_t workspaceSlots(int64_t tokens, int64_t sequences) const {
    return tokens / chunkSize + sequences + 1;
  }
  /// The chunk-parallel kernel's grid rows for `ctas` CTAs a row (sequences
  /// x value heads x value tiles) and sequences of up to `chunks` chunks:
  /// a row a chunk, fewer where the CTAs spill, at most 65535 (CUDA's limit
  /// on grid.y); the kernel walks the chunks gridDim.y apart.
  int64_t chunkRows(int64_t ctas, int64_t chunks) const {
    int64_t rows = chunks;
    if (spillFloats > 0 && ctas > 0)
      rows = std::min(rows, (kSpillingCTAs + ctas - 1) / ctas);
    return std::clamp<int64_t>(rows, 1, 65535);
  }
};

/// Device pointers of one backward call. `forward` holds the forward call's
/// inputs (its o and finalState are not read and must be null). Gradients
/// are fp32 in the layouts of the inputs they belong to (Problem's):
/// dq, dk [B, T, H, K]; dv [B, T, HV, V]; dg as g; dBeta as beta; da, db
/// [B, T, HV, K]; dGateALog [HV]; dGateDtBias as gate_dt_bias;
/// dInitialState [N, HV, K, V]. Each is required exactly where its input
/// is given, and backward() overwrites it whole. dO is in the spec's dtype
/// with o's layout; dFinalState [N, HV, K, V] fp32 may be null (zero).
struct BackwardArgs {
  ForwardArgs forward;
  const void *dO = nullptr;
  const float *dFinalState = nullptr;
  float *dq = nullptr, *dk = nullptr, *dv = nullptr;
  float *dg = nullptr, *dBeta = nullptr;
  float *da = nullptr, *db = nullptr;
  float *dGateALog = nullptr, *dGateDtBias = nullptr;
  float *dInitialState = nullptr;
};

/// The plan's source compiled by NVRTC for `arch`: the cubin. No GPU needed.
Expected<std::string> compileBackwardPlan(const BackwardPlan &plan,
                                          const std::string &arch);

struct BackwardWorkspaceLayout; // WorkspaceLayout.h

/// A compiled, loaded backward for one spec and schedule.
class BackwardKernel {
public:
  /// Compiles the plan with NVRTC for device `ordinal`'s arch and loads it
  /// (loadBackwardKernel, in the autotune library, goes through the cubin
  /// cache instead).
  static Expected<BackwardKernel> load(const BackwardPlan &plan,
                                       int ordinal = 0);
  /// Loads `cubin`, compiled from `plan.source` (compileBackwardPlan).
  static Expected<BackwardKernel> fromCubin(const BackwardPlan &plan,
                                            const std::string &cubin,
                                            int ordinal = 0);
  /// Checks `args` (the forward's checks, then dO and the gradients:
  /// required, stray, aligned, not overlapping any input), zeroes the
  /// gradients and launches the kernels on the stream; nothing is written
  /// on error. The chunk states go to the kernel's own workspace, allocated
  /// on first use and reallocated for a larger call: calls that overlap in
  /// time must be on one stream, and a CUDA graph that captured a call may
  /// be left pointing at freed memory.
  Status backward(const BackwardArgs &args) const;

  /// As backward(args), with the chunk states in `workspace`, lent by the
  /// caller for this call (workspaceBytes for its shape, at least): nothing
  /// is kept in the kernel, so calls on several streams may overlap and a
  /// captured CUDA graph holds only the caller's memory.
  Status backward(const BackwardArgs &args, const Workspace &workspace) const;

  /// The bytes of workspace a call of this shape needs (args' batch, seqLen
  /// and numSequences; its pointers are not read). InvalidArgument for a
  /// shape no call can have.
  Expected<size_t> workspaceBytes(const ForwardArgs &args) const;

  const BackwardPlan &plan() const { return plan_; }
  const cuda::Kernel &scansFunction() const { return scans_; }
  const cuda::Kernel &backwardFunction() const { return backward_; }

private:
  /// Zeroes the gradients and launches the kernels of the checked call, its
  /// workspace at `base`, laid out as `layout`.
  Status launch(const BackwardArgs &args, char *base,
                const BackwardWorkspaceLayout &layout) const;

  BackwardPlan plan_;
  int ordinal_ = 0;
  std::shared_ptr<cuda::Module> module_;
  cuda::Kernel scans_, backward_, zero_;
  std::vector<cuda::Kernel> prepares_; ///< plan_.prepares' kernels
  /// The workspace of forward(args) / backward(args): the kernel's own.
  struct OwnWorkspace {
    std::mutex mutex;
    cuda::DeviceBuffer buffer;
  };
  std::shared_ptr<OwnWorkspace> workspace_;
};

} // namespace lina

#endif // LINA_RUNTIME_BACKWARDKERNEL_H
