//===- ChunkKernel.h - Launching generated chunkwise kernels ----*- C++ -*-===//
//
// Part of lina. The runtime half of a kernel: a KernelPlan (CUDA source plus
// the launch facts the code generator decided) is compiled with NVRTC for the
// device, loaded, and run on the caller's device pointers and stream. No MLIR
// here: plans can be generated ahead of time and shipped.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_RUNTIME_CHUNKKERNEL_H
#define LINA_RUNTIME_CHUNKKERNEL_H

#include "lina/Runtime/CudaApi.h"
#include "lina/Runtime/Memory.h"
#include "lina/Runtime/Module.h"
#include "lina/Runtime/Nvrtc.h"
#include "lina/Runtime/Status.h"
#include "lina/Runtime/Workspace.h"
#include "lina/Spec/Spec.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace lina {

struct ForwardWorkspaceLayout;

/// How the chunks of a sequence are scheduled on the GPU.
enum class Strategy {
  /// One kernel: a CTA per (sequence, value head, value tile) walks its chunks
  /// in order with the state on chip and writes each chunk's output.
  FusedScan,
  /// Two kernels: a scan writes every chunk's starting state to a workspace,
  /// then a chunk-parallel kernel computes all outputs from those states.
  Materialize,
  /// Two kernels: a chunk-parallel kernel computes the state-independent
  /// part of every chunk (solves, intra-chunk products) into a workspace,
  /// then a scan like FusedScan loads it and does only the state's part.
  Split,
};
const char *toString(Strategy);
/// "fused", "materialize" or "split"; false for anything else.
bool parseStrategy(const std::string &name, Strategy &out);

/// Everything the launcher needs, decided by the code generator.
struct KernelPlan {
  /// The spec the kernel computes: the one lina-specialize made of the
  /// caller's.
  Spec spec;
  /// The caller's spec, as written (planChunkKernel and the cubin cache set
  /// it): a call may pass every input it names, also one `spec` does not
  /// read (b of a dplr spec whose a is zero), which the kernel ignores.
  std::optional<Spec> written;
  Strategy strategy = Strategy::FusedScan;
  int64_t chunkSize = 64;
  int64_t tileV = 64;   ///< value columns per CTA
  int64_t threads = 128;
  std::string source;   ///< CUDA C++, self-contained (no #include)
  std::string scanKernel;   ///< the fused kernel, or the materialize scan
  unsigned scanSharedBytes = 0;
  std::string outputKernel; ///< materialize only
  unsigned outputSharedBytes = 0;
  std::string prepareKernel; ///< split only; empty when nothing is stored
  unsigned prepareSharedBytes = 0;
  /// Split: fp32s of stored values per (chunk slot, value head).
  int64_t chunkDataFloats = 0;
  /// Segments (Segments.cuh): a sequence may run as up to `segments` pieces
  /// at once; the combine and carry kernels make the result exact. 1: off.
  int64_t segments = 1;
  std::string combineKernel, carryKernel;
  unsigned carrySharedBytes = 0;
  /// Decay factors a chunk (1, or key_dim with per-channel gates).
  int64_t segmentGateColumns = 0;
  /// The kernels compute global element offsets in 64-bit. A generator that
  /// emits 32-bit offsets sets this false; forward() then refuses calls for
  /// which needs64BitIndex() holds (ForwardChecks.h).
  bool index64 = true;
  /// The kernels use sm_90a's own instructions (wgmma): compiled for
  /// "sm_90a" on an sm_90 GPU (kernelArch), refused on any other.
  bool needsSm90a = false;

  int64_t valueTiles() const { return spec.valueDim / tileV; }
  /// The workspace of the chunk-parallel strategies holds a record per
  /// (chunk slot, value head): a state (materialize) or the stored values
  /// (split); the fused scan has none.
  int64_t workspaceRecordFloats() const {
    return strategy == Strategy::FusedScan   ? 0
           : strategy == Strategy::Materialize ? spec.keyDim * spec.valueDim
                                               : chunkDataFloats;
  }
  /// Chunk slots of a call: one per (sequence, chunk), see chunk_slot in
  /// the prelude.
  int64_t workspaceSlots(int64_t tokens, int64_t sequences) const {
    return tokens / chunkSize + sequences + 1;
  }
};

/// Device pointers of one forward call. Layouts are those of
/// lina::reference::Problem: q, k [B, T, H, K]; v, o [B, T, HV, V]; a, b
/// [B, T, HV, K] in the spec's dtype; g (log gates or their pre-activation)
/// and beta fp32; gateALog [HV], gateDtBias [HV] or [HV K] fp32; states
/// [N, HV, K, V] fp32; cuSeqlens [N + 1] int64 with batch 1 when varlen.
struct ForwardArgs {
  const void *q = nullptr, *k = nullptr, *v = nullptr;
  const float *g = nullptr, *beta = nullptr;
  const void *a = nullptr, *b = nullptr;
  const float *gateALog = nullptr, *gateDtBias = nullptr;
  void *o = nullptr;
  const float *initialState = nullptr;
  float *finalState = nullptr;
  const int64_t *cuSeqlens = nullptr;
  int64_t batch = 1, seqLen = 0;
  /// Varlen only (cuSeqlens has numSequences + 1 entries); ignored otherwise,
  /// where the batch is the number of sequences.
  int64_t numSequences = 0;
  cuda::CUstream stream = nullptr;
  /// Also check the values of cu_seqlens and of the fp32 gate inputs (finite
  /// g, beta, A_log, dt_bias) by copying them to the host first: this waits
  /// for the stream, so it is for debugging. LINA_CHECK_INPUTS=1 turns it on
  /// for every call.
  bool checkInputs = false;
};

/// How a call cuts each sequence into segments (Segments.cuh): `count`
/// pieces of `length` tokens, the last one shorter where the length does
/// not divide.
struct SequencePieces {
  int64_t count = 1, length = 0;
};

/// A sequence of `seqLen` tokens in at most `segments` pieces of equal
/// whole chunks (ceil(T / segments) rounded up to `chunkSize`), the last
/// piece what is left, so fewer pieces where T is short; one piece of T
/// tokens where that leaves one.
SequencePieces segmentPieces(int64_t seqLen, int64_t segments,
                             int64_t chunkSize);

/// The plan's segments for this call's sequences (segmentPieces). Packed
/// (varlen) sequences are cut on the device, each by its own length
/// (sequence_bounds), into `count` pieces of at most `length` tokens (the
/// longest a piece can be: the packed total's); the plan's segments are
/// then the most a call takes: only as many as keep the pieces' CTAs
/// within two an SM of `smCount`, and none where the sequences' heads alone
/// give half the SMs a CTA (many packed sequences already fill the GPU,
/// and pieces would only add the carry's bytes: at 1x8192x96, two pieces
/// of whole heads took mamba2 from 0.708 to 0.743 ms, while at 4x2048x16,
/// 64 heads, four took it from 0.170 to 0.156; docs/perf-notes.md).
SequencePieces segmentsFor(const KernelPlan &plan, const ForwardArgs &args,
                           int64_t smCount);

/// The NVRTC options every chunk kernel is compiled with for `arch`. One
/// place, because they are part of the cubin cache key: a cached cubin may
/// only stand in for what load() would compile.
cuda::CompileOptions kernelCompileOptions(const std::string &arch);

/// The arch to compile `plan` for on a GPU of `arch`: "sm_90a" for a plan
/// that needs it on an sm_90 GPU, else `arch` itself.
std::string kernelArch(const KernelPlan &plan, const std::string &arch);

/// Whether `plan` can run on a GPU of `arch` (named `gpuName` in the
/// message): the wgmma scans need sm_90. Checked before compiling, so the
/// refusal names the fix instead of showing a compile error.
Status checkKernelArch(const KernelPlan &plan, const std::string &arch,
                       const std::string &gpuName);

/// kernelCompileOptions for `plan` on a GPU of `arch` (at kernelArch).
cuda::CompileOptions kernelCompileOptions(const KernelPlan &plan,
                                          const std::string &arch);

/// A compiled, loaded chunkwise kernel for one spec and schedule.
class ChunkKernel {
public:
  /// Compiles the plan with NVRTC for device `ordinal`'s arch and loads it.
  /// Thread-safe; loading makes the device's primary context current.
  static Expected<ChunkKernel> load(const KernelPlan &plan, int ordinal = 0);

  /// Loads `image`, compiled earlier from `plan` for device `ordinal`'s arch
  /// (a cubin from lina's cache): no NVRTC. Only the plan's launch facts are
  /// read; its source may be empty.
  static Expected<ChunkKernel> loadImage(const KernelPlan &plan,
                                         const std::string &image,
                                         int ordinal = 0);

  /// Checks `args` (checkForwardArgs in ForwardChecks.h: pointers,
  /// alignment, batch/varlen, sizes, overlapping outputs; with checkInputs
  /// or LINA_CHECK_INPUTS=1 also the values) and launches; nothing is
  /// written on error. The chunk-parallel strategies use the kernel's own
  /// workspace, allocated on first use and reallocated for a larger call:
  /// calls that overlap in time must be on one stream, and a CUDA graph
  /// that captured a call may be left pointing at freed memory.
  Status forward(const ForwardArgs &args) const;

  /// As forward(args), with the scratch in `workspace`, which the caller
  /// lends for this call (workspaceBytes for its shape, at least; none where
  /// that is 0). Nothing is kept in the kernel, so calls on several streams
  /// may overlap and a captured CUDA graph holds only the caller's memory.
  Status forward(const ForwardArgs &args, const Workspace &workspace) const;

  /// The bytes of workspace a call of this shape needs (args' batch, seqLen
  /// and numSequences; its pointers are not read): 0 for the fused scan.
  /// InvalidArgument for a shape no call can have.
  Expected<size_t> workspaceBytes(const ForwardArgs &args) const;

  const KernelPlan &plan() const { return plan_; }
  /// The loaded functions, for their attributes (registers): the fused
  /// kernel or the materialize scan, and the materialize output kernel
  /// (a null handle for fused).
  const cuda::Kernel &scanFunction() const { return scan_; }
  const cuda::Kernel &outputFunction() const { return output_; }
  const cuda::Kernel &prepareFunction() const { return prepare_; }

private:
  /// Checks `args`, then its workspace's layout into `layout`.
  Status prepare(const ForwardArgs &args,
                 ForwardWorkspaceLayout &layout) const;
  /// Launches the checked call's kernels with their scratch at `base`, laid
  /// out as `layout` says.
  Status launch(const ForwardArgs &args, const ForwardWorkspaceLayout &layout,
                char *base) const;

  KernelPlan plan_;
  int ordinal_ = 0;
  std::shared_ptr<cuda::Module> module_;
  cuda::Kernel scan_, output_, prepare_, combine_, carry_;
  /// The workspace of forward(args) / backward(args): the kernel's own.
  struct OwnWorkspace {
    std::mutex mutex;
    cuda::DeviceBuffer buffer;
  };
  std::shared_ptr<OwnWorkspace> workspace_;
  int64_t smCount_ = 0;
};

} // namespace lina

#endif // LINA_RUNTIME_CHUNKKERNEL_H
