//===- KernelPlanner.h - From a spec to a KernelPlan ------------*- C++ -*-===//
//
// Part of lina. The JIT front half without MLIR in its interface: spec ->
// lina-specialize -> lina-chunk -> lina-schedule -> CUDA C++, as a KernelPlan
// the runtime compiles and launches. Safe to call from several threads (each
// call has its own MLIRContext).
//
//===----------------------------------------------------------------------===//
#ifndef LINA_CODEGEN_KERNELPLANNER_H
#define LINA_CODEGEN_KERNELPLANNER_H

#include "lina/Runtime/BackwardKernel.h"
#include "lina/Runtime/ChunkKernel.h"
#include "lina/Runtime/KernelForms.h"
#include "lina/Spec/Spec.h"

namespace lina {

/// The knobs of lina-schedule (and of the autotuner).
struct ScheduleOptions {
  int64_t chunkSize = 64;
  int64_t tileV = 64; ///< value columns per CTA; divides value_dim
  int64_t warps = 4;
  Strategy strategy = Strategy::FusedScan;
  /// Issue the next chunk's tile loads before this chunk's work (kernels
  /// that walk the chunks; docs/perf-notes.md).
  bool prefetch = false;
  /// Keep the scan's state in shared memory even where it fits in
  /// registers (StateRegisters.cuh). Off by default; for comparisons.
  bool sharedState = false;
  /// Sum per-channel decay products directly instead of factoring them
  /// onto the tensor cores where the chunk's gates allow (Prelude.cuh's
  /// factored_decay_product, 1.05-1.10x on the H200: docs/perf-notes.md).
  /// Off by default; for comparisons.
  bool directDecay = false;
  /// The kernels that walk the chunks ask ptxas for two CTAs an SM
  /// (`__launch_bounds__(threads, 2)`), where their shared memory allows
  /// two. Measured for the delta rules' whole-head scans, which otherwise
  /// take ~170 registers and run one CTA an SM: 4-9% faster where the heads
  /// outnumber the SMs (4x4096x64x128), slower where they do not
  /// (docs/perf-notes.md). Off by default.
  bool twoCTAs = false;
  /// Run each sequence as up to this many segments at once, each from a
  /// zero state, and add what the true starting states contribute after
  /// the scan (Segments.cuh; split strategy or the wgmma scan, additive
  /// rules with a decay).
  /// More CTAs for few long sequences: pieces of equal whole chunks, the
  /// last one shorter, and fewer where the sequences are short
  /// (ChunkKernel::segmentsFor). 1: off.
  int64_t segments = 1;
  /// The scan as Hopper's warpgroup products, printed from the chunk's ops
  /// (WarpgroupScan.h): 64-token chunks, a warpgroup for each 64 value
  /// columns of a head or of a 64-column tile of one. For the additive
  /// rules with at most a scalar decay one fused kernel, nothing through
  /// memory but the inputs and the output (with segments it also stores
  /// what the combine and carry kernels read, the plan's strategy then
  /// split); for the delta and DPLR rules and the per-channel decays a
  /// chunk-parallel kernel first stores each chunk's record (its triangular
  /// solve, its operands scaled by a per-channel decay), the plan's
  /// strategy then split. Needs sm_90a; the planner refuses other rules and
  /// shapes with the reason. (The `mma` knob: warpgroup when set, warp, the
  /// mma.sync products, when not.)
  bool warpgroup = false;
};

/// A sensible schedule for `spec` when nothing was tuned: what
/// lina-choose-schedule (codegen/lib/Cuda/ChooseSchedule.cpp) records for
/// it after lina-specialize, knowing nothing of the call.
ScheduleOptions defaultSchedule(const Spec &spec);

/// The same for a known grid: `sequences` sequences of `seqLen` tokens (0:
/// unknown) on a GPU of `smCount` multiprocessors and arch `arch` (e.g.
/// "sm_90"; "" unknown) (what kernel loaders and the tuner use when they
/// know the shape; docs/autotune.md).
ScheduleOptions defaultSchedule(const Spec &spec, int64_t sequences,
                                int64_t smCount, int64_t seqLen = 0,
                                const std::string &arch = "");

/// `s` with the wgmma scan and its one layout: the fused strategy, 64-token
/// chunks, a whole d128 head (tile-v 128) on eight warps. (Inline, as is
/// withoutWarpgroup: the tuner, which links no MLIR, uses them too.)
inline ScheduleOptions withWarpgroup(ScheduleOptions s) {
  s.strategy = Strategy::FusedScan;
  s.chunkSize = 64;
  s.tileV = 128;
  s.warps = 8;
  s.prefetch = true; // what the kernel does anyway (TMA, a chunk ahead)
  s.warpgroup = true;
  return s;
}

/// withWarpgroup for `spec`: a warpgroup for each 64 value columns of a head
/// (tile-v 64 on 4 warps at d64, and for DPLR at key dim 128, whose chunk
/// record leaves shared memory for two stages of a 64-column tile only);
/// segments a default chose for the split scan go where the wgmma scan runs
/// the spec's sequences whole (GLA's per-channel decay:
/// canRunWgmmaSegments); segments asked for after this stay, and the
/// planner names why it refuses them.
inline ScheduleOptions withWarpgroup(ScheduleOptions s, const Spec &spec) {
  s = withWarpgroup(s);
  if (spec.valueDim == 64 || wgmmaScanNeedsValueTiles(spec)) {
    s.tileV = 64;
    s.warps = 4;
  }
  if (!canRunWgmmaSegments(spec))
    s.segments = 1;
  return s;
}

/// `s` with the wgmma scan set aside: the split strategy on 16-token chunks,
/// as defaultSchedule plans the same specs off Hopper. A caller that asks
/// for a layout knob of its own (chunk size, tile, warps, strategy,
/// segments) starts from this where the default had the warpgroup scan,
/// whose layout is fixed.
inline ScheduleOptions withoutWarpgroup(ScheduleOptions s) {
  if (!s.warpgroup)
    return s;
  s.warpgroup = false;
  s.strategy = Strategy::Split;
  s.chunkSize = 16;
  return s;
}

/// Runs the whole pipeline and prints the kernel(s). Errors name the problem
/// (e.g. shared memory over the limit for this chunk size and tile).
Expected<KernelPlan> planChunkKernel(const Spec &spec,
                                     const ScheduleOptions &options);

/// The backward's layout: chunk size, value columns per CTA and warps, of
/// both its kernels. Zero: the default for the spec (defaultBackwardSchedule).
struct BackwardScheduleOptions {
  int64_t chunkSize = 0;
  int64_t tileV = 0;
  int64_t warps = 0;
  /// How far lina-group-barriers moves an op of the gradients kernel up to
  /// share an earlier barrier interval; 0 runs the ops in the order that
  /// ends each tile's life soonest. Off unless asked for (or tuned): at 16
  /// the tiles' longer lives cost more than the barriers saved (H200, 4 x
  /// 2048 x 16 x 128: gdn's backward 3.26 -> 3.36 ms, kda's 4.53 -> 4.78).
  int64_t barrierWindow = 0;
};

/// The backward's layout where the caller sets no knob: what
/// lina-choose-schedule with `backward` records for the spec lina-specialize
/// makes of `spec` (ChooseSchedule.cpp).
BackwardScheduleOptions defaultBackwardSchedule(const Spec &spec);

/// spec -> lina-specialize -> lina-chunk -> lina-chunk-backward ->
/// lina-schedule, printed as the backward's two kernels. Errors name the
/// problem (a tile that does not divide value_dim, shared memory over the
/// limit for this chunk size and tile).
Expected<BackwardPlan> planBackwardKernel(const Spec &spec,
                                          const BackwardScheduleOptions &options);

} // namespace lina

#endif // LINA_CODEGEN_KERNELPLANNER_H
