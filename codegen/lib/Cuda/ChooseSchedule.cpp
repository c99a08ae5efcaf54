//===- ChooseSchedule.cpp - The schedule a call gets untuned -----------===//
//
// Part of lina. lina-choose-schedule: for each lina.recurrence, the schedule
// a call gets when nothing was tuned for it (chunk size, value tile, warps,
// strategy, the scan's options), chosen for the call it is told of (how
// many sequences, how long, on how many multiprocessors of which arch) and
// recorded on the op as its `chunk_size` and `schedule`; lina-chunk and
// lina-schedule follow the record. defaultSchedule (KernelPlanner.h), what
// the kernel loaders and the tuner start from, runs this pass.
//
// Every choice below was measured on an H200; the numbers say what it won.
//
//===----------------------------------------------------------------------===//
#include "lina/Codegen/KernelPlanner.h"
#include "lina/Codegen/Passes.h"
#include "lina/Dialect/Lina/IR/SpecConversion.h"
#include "lina/Runtime/KernelForms.h"
#include "lina/Transforms/Passes.h"
#include "lina/Transforms/Pipeline.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

#include <algorithm>

using namespace mlir;

namespace lina {
namespace {

/// Additive updates with a scalar, a fixed or no decay: the rules whose
/// chunk has the least state-independent work.
bool scalarGatedAdditive(const Spec &spec) {
  return spec.update == UpdateRule::Additive &&
         spec.decay != DecayKind::PerChannel;
}

/// The schedule for `spec` alone, when nothing is known of the call.
ScheduleOptions specDefault(const Spec &spec) {
  ScheduleOptions s;
  // 16-token chunks whose scan loads the next chunk while it computes this
  // one: with a chunk that short, the loads are most of a step, and hiding
  // them pays (H200, tv32 w8, docs/perf-notes.md):
  //   1x8192x96x128: gla 7.19 -> 6.29 ms, gdn 6.06 -> 4.55, kda 8.41 ->
  //   7.06, rwkv7 20.17 -> 16.28 (against C32, no prefetch; at C32 and C64
  //   prefetching changes nothing measurable); gla gains 6-7% at fla's
  //   other d128 shapes too (bench/compare_fla.py).
  //   8x1024x8x64: gla 0.302 -> 0.253 ms, gdn 0.250 -> 0.239, kda 0.374 ->
  //   0.298, rwkv7 1.059 -> 0.477 (against C64, C32 for the delta rule).
  // Short chunks also keep NVRTC fast: the register forward substitution
  // (tri_solve) of a 64-row chunk takes 15 s to compile.
  // Scalar-gated additive rules (retnet, simple_gla, mamba2, linear
  // attention) take 32-token chunks at d <= 64, where the split scan's step
  // is cheap enough that fewer steps win: mamba2 8x1024x8x64 0.096 ms at
  // C16 against 0.075 at C32 (linear attention 0.090 / 0.077).
  bool additive = scalarGatedAdditive(spec);
  s.chunkSize = additive && spec.keyDim <= 64 ? 32 : 16;
  s.prefetch = true;
  s.tileV = std::min<int64_t>(spec.valueDim, 32);
  while (spec.valueDim % s.tileV != 0)
    s.tileV /= 2;
  // Eight warps: 1x8192x96 gdn took 14.9 ms against 20.2 ms with four
  // (H200, docs/perf-notes.md); the CTA is latency-bound, not issue-bound.
  s.warps = 8;
  // Every rule splits: the state-independent work of a chunk (solves, decay
  // products, decayed q and k) runs chunk-parallel, and the scan keeps only
  // the products with the state: kda 1x8192x96x128 28.3 -> 8.4 ms, gdn 9.1
  // -> 6.1 ms when it was introduced. The scalar-gated additive rules kept
  // the fused scan until their split scan loaded its decayed q and k instead
  // of recomputing them: mamba2 1x8192x96x128 4.04 ms
  // fused (C32) against 1.32 split (C16 tv64); 8x1024x8x64 0.130 against
  // 0.075 (C32) (H200, docs/perf-notes.md).
  s.strategy = Strategy::Split;
  return s;
}

/// Segments (Segments.cuh) for a grid of few long sequences: where whole
/// heads would give at most a quarter of the SMs a CTA, each sequence is cut
/// into the most pieces, a power of two, that keep within two CTAs an SM
/// and 1024 tokens a piece, and the CTAs take whole heads. H200, one
/// binary (ms): 2x16384x16x128 (32 heads) mamba2 0.745 (tv32,
/// no segments) -> 0.530 (4 segments), 0.498 (8), 0.522 (16); gla 0.945 ->
/// 0.776, 0.746, 0.775. With more heads the carry's extra bytes cost more
/// than the idle SMs: 4x2048x16 (64 heads) mamba2 0.157 -> 0.152 (2), gla
/// 0.210 -> 0.216; 1x8192x96 mamba2 0.708 (whole heads) -> 0.743 (2), gla
/// 1.039 -> 1.108. 1 (none) also where the length is unknown or the rule
/// cannot run in segments: the delta rules and rwkv7, linear attention
/// (its q is scaled in the scan), fp32 specs. Packed (varlen) sequences go
/// by their number and the longest one's length (or a bound on it: the
/// Python package passes the packed length when the lengths are only on
/// the GPU); each call then takes as many
/// pieces as its own sequences' heads leave room for (ChunkKernel's
/// segmentsFor).
/// The most pieces, a power of two up to 16 and 1024 tokens a piece, whose
/// CTAs (`heads` a piece) stay within `room`.
int64_t piecesWithin(int64_t heads, int64_t seqLen, int64_t room) {
  int64_t segments = 1;
  while (segments < 16 && heads * segments * 2 <= room &&
         seqLen / (segments * 2) >= 1024)
    segments *= 2;
  return segments;
}

int64_t defaultSegments(const Spec &spec, int64_t sequences, int64_t smCount,
                        int64_t seqLen) {
  if (!canRunInSegments(spec) || spec.valueDim != 128 || seqLen <= 0 ||
      sequences <= 0 || smCount <= 0)
    return 1;
  int64_t heads = sequences * spec.valueHeads;
  if (4 * heads > smCount)
    return 1;
  return piecesWithin(heads, seqLen, 2 * smCount);
}

/// The wgmma scan's pieces where defaultSegments cuts (the printed scan's
/// segment records): as many as keep to a CTA an SM, the scan's one
/// (twice that for packed
/// sequences, whose pieces are cut each by its own length and come uneven).
/// H200 (ms, split with defaultSegments' 8 -> wgmma with
/// 2 / 4 / 8): mamba2 2x16384x16x128 0.502 -> 0.576 / 0.412 / 0.448, retnet
/// 0.497 -> 0.552 / 0.398 / 0.436; two packed prompts of 12000 and 20768
/// tokens (32 heads) mamba2 0.590 -> 0.465 (4), 0.439 (8); 1x16384x16
/// 0.278 -> 0.239 (8).
int64_t wgmmaSegments(const Spec &spec, int64_t sequences, int64_t smCount,
                      int64_t seqLen) {
  return piecesWithin(sequences * spec.valueHeads, seqLen,
                      spec.varlen ? 2 * smCount : smCount);
}

/// The schedule for `spec` on `sequences` sequences of `seqLen` tokens on
/// a GPU of `smCount` multiprocessors and arch `arch` (each 0 or "" where
/// unknown: then specDefault's).
ScheduleOptions chooseFor(const Spec &spec, int64_t sequences, int64_t smCount,
                          int64_t seqLen, const std::string &arch) {
  ScheduleOptions s = specDefault(spec);
  s.segments = defaultSegments(spec, sequences, smCount, seqLen);
  if (s.segments > 1) {
    // On Hopper the pieces run through the wgmma scan where it covers the
    // rule (mamba2, retnet at d128; wgmmaSegments).
    if (arch == "sm_90" && canRunWgmmaSegments(spec) && spec.keyDim == 128) {
      ScheduleOptions w = withWarpgroup(s, spec);
      w.segments = wgmmaSegments(spec, sequences, smCount, seqLen);
      return w;
    }
    s.tileV = 128;
    s.warps = 8;
    return s;
  }
  // On Hopper, the additive rules with at most a scalar decay run as one
  // fused kernel of warpgroup products (printed from the ops,
  // WarpgroupScan.h) wherever the grid has more heads than the segments'
  // threshold (a quarter of the SMs). H200, mamba2 against the split
  // default (ms), timed on a hand-written scan that the printed one
  // matches or beats (docs/benchmarks.md): 1x8192x96x128 0.707 ->
  // 0.407, 4x4096x64 0.689 -> 0.412, 4x2048x16 0.160 -> 0.110. With fewer
  // heads a CTA a head leaves the GPU idle and the split scan's segments
  // stay ahead (2x16384x16: 0.498 ms).
  //
  // The delta rules take it at any grid: they cannot run in segments, and
  // their split scans' 4 CTAs a head lose to one wgmma CTA a head even at 8
  // heads. H200, gdn d128 (ms, split default -> wgmma): 1x8192x96 1.305 ->
  // 0.602, 4x4096x64
  // 1.519 -> 0.676, 2x16384x16 1.351 -> 0.921, 1x16384x16 1.114 -> 0.897,
  // 2x8192x8 0.568 -> 0.456, 1x32768x8 1.977 -> 1.652, 1x4096x32 0.352 ->
  // 0.248.
  //
  // GLA (the additive rule with a per-channel decay) as the preset spells
  // it (given gates, no write weight, q and k as they come, bf16) takes its
  // printed pair between that threshold and one and a half CTAs an SM: a
  // whole head is one CTA an SM, and with more heads the split scan's CTAs,
  // several an SM, pack better. H200 (ms, split default -> wgmma, timed on a
  // hand-written pair that the printed one beats: H100 1x8192x96 0.901
  // against 0.983, its prepare kernel 0.583 against 0.648): 1x8192x96 1.050
  // -> 0.864, 1x8192x128 1.227 -> 1.174, 1x8192x160 1.693 -> 1.489,
  // 2x8192x96 1.852 -> 1.692, 4x2048x16 0.210 -> 0.177; 4x4096x64 (256
  // heads) 1.092 -> 1.174. At a quarter of the SMs or fewer its segments
  // stay ahead of the scan on two CTAs a head: 1x16384x16 0.422 against
  // 0.493, 1x32768x8 0.458 against 0.743 (2x16384x16 0.767 against 0.734).
  const bool delta = spec.update == UpdateRule::Delta,
             gla = spec.update == UpdateRule::Additive &&
                   spec.decay == DecayKind::PerChannel;
  const int64_t heads = sequences * spec.valueHeads;
  //
  // The delta rules' printed kernels run a CTA a 64-column value tile
  // where two CTAs a head still fit in the SMs (tile-v 64 on four warps:
  // twice the CTAs, each chain a little shorter). H100, mma.sync split
  // default -> printed (ms):
  // gdn_f16 1x8192x96 1.330 -> 0.774, delta_fixed_decay 1.416 -> 0.756,
  // GDN with computed gates, four value heads a key head, 1x8192x24x96
  // 1.348 -> 0.802 (whole heads, before lina-warpgroup-record took a
  // further 8-10 % off); with its record, whole heads -> value tiles:
  // gdn_f16 2x16384x16 1.069 -> 1.003, 1x16384x16 1.025 -> 0.959 (the
  // split: 1.102), 2x8192x8 0.515 -> 0.488 (the split: 0.560), 4x2048x16
  // 0.169 -> 0.165, 1x4096x32 0.292 -> 0.268, delta_fixed_decay alike; at
  // 1x8192x96 value tiles lose (0.697 -> 1.123). Each tile's CTA on eight
  // warps, the scores on the second warpgroup (scoresApart), H100 (ms,
  // four warps -> eight; in parentheses a hand-written scan of two CTAs a
  // head, one warpgroup a value half, timed beside them):
  // 2x16384x16 gdn_f16 0.964 -> 0.711, Gated DeltaNet's spelling printed
  // 0.961 -> 0.715 (0.774), DeltaNet's 0.775 -> 0.620 (0.771);
  // 4x2048x16 0.160 -> 0.131 (0.132), 0.133 -> 0.117 (0.130); 1x4096x32
  // 0.254 -> 0.199 (0.209), 0.206 -> 0.173 (0.209). GLA's printed pair
  // takes the same tile on eight warps (its second warpgroup the prepare
  // kernel's) where two CTAs a head fit.
  //
  // At d64 the printed delta kernels take whole heads (a warpgroup for the
  // 64 value columns): H100, 995058d's tree, gdn d64 (ms, split default ->
  // printed): 1x8192x96 0.837 -> 0.438, 2x16384x16 1.070 -> 0.607,
  // 4x2048x16 0.188 -> 0.099, 1x4096x32 0.285 -> 0.159, 4x4096x64 0.831
  // -> 0.502; DeltaNet 1x8192x96 0.768 -> 0.374. (K != V, KDA's and the
  // additive rule's d64 kernels have not been timed against the split
  // scan; the tuner searches them.)
  //
  // The delta rule with a per-channel decay (KDA) takes its printed pair by
  // the same rule: H100, kda_f16, mma.sync split default -> whole heads ->
  // value tiles on eight warps (ms): 1x8192x96 2.941 -> 2.532 -> 2.619,
  // 4x4096x64 3.624 -> 3.306 -> 3.323, 2x8192x32 2.156 -> 1.748 -> 1.729,
  // 4x2048x16 0.563 -> 0.480 -> 0.472, 2x16384x16 2.383 -> 1.958 -> 1.907,
  // 1x4096x32 0.617 -> 0.537 -> 0.515; KDA as the preset spells it (bf16)
  // against a hand-written pair of two CTAs a head on few heads, at fla's
  // five shapes (H100, 23867cd): 1x8192x96 1.264 against 1.277, 2x16384x16
  // 1.022 against 1.028, 4x2048x16 0.237 against 0.249, 1x4096x32 0.285
  // against 0.292, 8x1024x8 0.133 against 0.140.
  //
  // GLA in bf16, however written, takes its printed pair in the window
  // above (same run): the preset 1x8192x96 0.904 against a hand-written
  // pair's 0.985, 4x2048x16 0.176 against 0.194, 8x1024x8 0.099 against
  // 0.114; gla_write_gate 1x8192x96 0.950 against the split's 1.118. Below
  // the window the split's segments mostly stay ahead (the preset 1x16384x16
  // 0.428 against 0.557, 1x32768x8 0.459 against 0.886; 2x16384x16 0.792
  // against 0.758). Its f16 spellings (tf32 scores) have not been timed
  // against the split: the default keeps the split kernels for them, the
  // tuner searches the printed ones.
  //
  // DPLR in bf16 at d128 takes its printed pair at any grid, a 64-column
  // value tile on eight warps: the prepare kernel (four tiles, one CTA an
  // SM) runs both warpgroups, the scan's second leaves at once. H100, lina
  // cd0afff, rwkv7 (ms; split default -> printed on four warps -> on
  // eight): 1x8192x96 3.420 -> 3.201 -> 2.811, 4x4096x64 4.575 -> 4.060 ->
  // 3.570, 2x16384x16 2.768 -> 2.221 -> 1.959, 4x2048x16 0.624 -> 0.541 ->
  // 0.478. Its f16 and d64 spellings have not been timed against the
  // split.
  const bool printedDplr = spec.update == UpdateRule::DPLR &&
                           spec.dtype == DType::BF16 && spec.keyDim == 128 &&
                           spec.valueDim == 128;
  if (arch == "sm_90" && sequences > 0 && smCount > 0 && printedDplr &&
      canRunWgmmaScan(spec)) {
    ScheduleOptions w = withWarpgroup(s, spec);
    w.tileV = 64;
    w.warps = 8;
    return w;
  }
  const bool printedGla = gla && spec.dtype == DType::BF16;
  const bool splitChannels = (spec.decay == DecayKind::PerChannel ||
                              spec.update == UpdateRule::DPLR) &&
                             !delta && !printedGla;
  //
  // The additive rules with at most a scalar decay take it at d64 at any
  // grid too, a warpgroup a head: H200, 9cdf172's tree, mamba2 d64 (ms,
  // split default -> printed, bf16; in f16 alike): 1x8192x96 0.495 ->
  // 0.219, 4x4096x64 0.539 -> 0.154, 4x2048x16 0.104 -> 0.064, 8x1024x8
  // 0.053 -> 0.037, 2x16384x16 0.582 -> 0.434 (the split's default had no
  // segments there). Few long sequences that the split kernels run in
  // segments keep them: the printed scan's pieces are planned at d128
  // only (wgmmaSegments).
  const bool d64 = spec.keyDim == 64 && spec.valueDim == 64 &&
                   spec.decay != DecayKind::PerChannel;
  const bool d64Delta = delta && d64,
             d64Additive = spec.update == UpdateRule::Additive && d64;
  if (arch == "sm_90" && sequences > 0 && smCount > 0 &&
      (delta || d64Additive || 4 * heads > smCount) &&
      (!gla || 2 * heads <= 3 * smCount) && !splitChannels &&
      canRunWgmmaScan(spec) &&
      ((spec.keyDim == 128 && spec.valueDim == 128) || d64Delta ||
       d64Additive)) {
    ScheduleOptions w = withWarpgroup(s, spec);
    if ((delta || printedGla) && !d64Delta && 2 * heads <= smCount) {
      w.tileV = 64;
      w.warps = 8;
    }
    return w;
  }
  // A warp for each 16 value columns of a whole head (tile-v 128 on eight
  // warps): every warp holds whole key rows of its columns, so the chunk's
  // ops need no CTA barrier between them and no reduction of partial sums
  // (RegisterState::ownColumns), when a CTA a head still covers two thirds
  // of the multiprocessors. H200, against the split
  // layouts below (ms): 1x8192x96x128 (96 CTAs) mamba2 0.849 -> 0.808, gdn
  // 1.349 -> 1.322, kda 2.13 -> 1.91, gla 1.22 -> 1.16; 4x4096x64x128 (256
  // CTAs) mamba2 0.912 -> 0.754, gdn 1.795 -> 1.517, kda 2.46 -> 2.26, gla
  // 1.40 -> 1.24. With fewer heads the split layouts' 2-4x more CTAs win
  // (2x16384x16x128, 32 CTAs: mamba2 0.811 against 1.158). Not for rwkv7,
  // whose output adds a third term after the fused product, nor linear
  // attention, whose q is scaled in the scan: neither keeps to its columns.
  bool linearAttention =
      spec.update == UpdateRule::Additive && spec.decay == DecayKind::None;
  bool ownColumns = spec.valueDim == 128 && spec.update != UpdateRule::DPLR &&
                    !linearAttention && sequences > 0 && smCount > 0 &&
                    3 * sequences * spec.valueHeads >= 2 * smCount;
  if (ownColumns) {
    s.tileV = 128;
    s.warps = 8;
    // The delta rules' whole-head scans take ~170 registers, one CTA an SM;
    // where their CTAs outnumber the SMs, two an SM (128 registers) run the
    // grid in fewer waves. H200, without -> with (ms):
    // 4x4096x64x128 (256 CTAs) gdn 1.518 -> 1.418, kda 2.185 -> 2.088,
    // DeltaNet 1.397 -> 1.274; 2x4096x96 (192) gdn 1.307 -> 1.215 (its scan
    // spills 24 bytes at 96 value heads and still wins); 8x2048x48 (384)
    // 1-2%. With fewer CTAs than SMs the second CTA never comes and the
    // tighter code costs (1x8192x96: gdn 1.305 -> 1.432).
    s.twoCTAs = spec.update == UpdateRule::Delta &&
                sequences * spec.valueHeads > smCount;
    return s;
  }
  // Otherwise, delta-rule and additive scans (all but DPLR) with the state
  // in registers: value tiles of 64 when that still gives every
  // multiprocessor a CTA. Each CTA then splits the key columns two ways
  // instead of four and the CTAs of a head repeat half as much key-side
  // work. H200, 1x8192x96x128 (192 CTAs of tv64 on 132 SMs): gdn 3.61 ->
  // 2.92 ms, kda 5.85 -> 4.53; mamba2 1.358 -> 1.317 ms, linear attention
  // 1.484 -> 1.325 (docs/perf-notes.md). With fewer CTAs than SMs
  // (8x1024x8x64: 64) tv32 stays: 0.200 against 0.229.
  int64_t wide = 64;
  int64_t wideCTAs = spec.valueDim % wide == 0 && spec.valueDim > wide &&
                             sequences > 0 && smCount > 0
                         ? sequences * spec.valueHeads * (spec.valueDim / wide)
                         : 0;
  bool fills = wideCTAs > 0 && wideCTAs >= smCount;
  // The delta rule without per-channel gates (gdn, DeltaNet) instead keeps
  // 32 columns on four warps where tv64 would give between one and two CTAs
  // an SM (1x8192x96: 192 CTAs, 60 SMs running two and 72 one): twice the
  // CTAs, three or four a multiprocessor, each splitting the keys two ways.
  // H200: 1x8192x96x128 gdn 1.597 -> 1.477 ms, DeltaNet 1.529
  // -> 1.373; kda (2.172 -> 2.218), gla and rwkv7 lost with it. With more
  // CTAs tv64 w8 stays ahead: 4x4096x64x128 (512 of tv64) gdn 1.768 ms
  // against 1.997, DeltaNet 1.646 against 1.693.
  if (fills && wideCTAs < 2 * smCount && spec.update == UpdateRule::Delta &&
      spec.decay != DecayKind::PerChannel) {
    s.warps = 4;
    return s;
  }
  // gla (per-channel gates) widens too since its intra output is redone in
  // the scan (H200, 99027af, 1x8192x96x128): tv64 1.248 ms against
  // tv32 1.279; and its tv32 scan, held to three CTAs an SM (CudaEmitter),
  // spills a word at 96 heads. rwkv7 keeps 32 columns.
  bool widens = spec.update != UpdateRule::DPLR;
  if (widens && fills)
    s.tileV = wide;
  return s;
}

/// The backward's layout for `spec` (its kernels: the forward's scan that
/// materializes each chunk's starting state, the dS scan, the chunk-parallel
/// gradients; one thread count serves all three). Every tile of a chunk
/// lives in shared memory, past it in a per-CTA global region, and the
/// gradients kernel, 80 % of the time or more, runs one CTA an SM: wider
/// value tiles redo the key-side work of a chunk for fewer tiles, and more
/// warps hide more of the body's latency. H200, a71cdcb, `lina tune P
/// --backward --shape 4,2048,16 --dk 128 --dv 128` (fast, from C16 tv32 w8;
/// ms):
///   gdn        C32 tv64 w8 8.79, C32 tv128 w8 9.49, C32 tv64 w16 9.53,
///              C16 tv64 w8 9.85; C16 tv32 w8 14.15
///   simple_gla C32 tv64 w8 3.12, C32 tv64 w16 3.36, C32 tv128 w8 3.51;
///              C16 tv32 w8 6.12
///   gla        C16 tv128 w16 5.04, C32 tv128 w16 5.32, C16 tv128 w8 6.46;
///              C16 tv32 w8 9.71
///   kda        C16 tv128 w16 11.41, C16 tv128 w8 13.34, C16 tv64 w8 13.97;
///              C16 tv32 w8 21.61 (C32 tv32 w8 30.63)
///   rwkv7      C16 tv64 w16 16.20, C16 tv64 w8 20.22, C32 tv64 w16 23.11;
///              C16 tv32 w8 31.79 (tv128 needs more than a CTA's shared
///              memory)
/// Since the gradients kernel's solves moved to registers and the reverse
/// scan's operands stay bf16, whole heads beat 64 columns for the scalar
/// decays too (H100, 6f02305, the backward's kernels, C32 w8, tv64 /
/// tv128 ms): gdn 4x2048x16 5.09 / 4.22, 2x4096x32 10.09 / 8.39; mamba2
/// 4x2048x16 2.31 / 1.91. f16 and f32 specs keep 64 columns: their chunk
/// states are fp32 tiles, twice a bf16 one's shared memory (not timed).
/// So at d128: scalar, fixed or no decay take 32-token chunks of whole
/// heads (bf16; 64 columns otherwise) on eight warps; per-channel decays
/// 16-token chunks of whole heads on sixteen, DPLR 64 columns; except gla, the
/// additive rule with per-channel decay, which takes 32-token chunks of whole
/// heads: since its gate gradient's products are terms of one sum they take as
/// long as 16-token ones (H200, c219641, the backward's kernels: C32 3.43
/// / 3.42 ms, C16 3.43 / 3.41) and store half the chunk states and their
/// gradients, the training step's memory below fla's. d64 heads follow the
/// same rule, 16-token chunks for gla
/// (H200, 7488b5d, `lina run P --backward --device gpu --shape 8,1024,8
/// --dk 64 --dv 64`, the backward's kernels, ms; C16 tv32 w8 / C16 tv64
/// w16 / C32 tv64 w8): gdn 2.31 / 2.35 / 1.95, mamba2 0.87 / 0.85 / 0.72,
/// gla 1.31 / 0.99 / 1.13, kda 4.38 / 2.83 / 3.16, rwkv7 5.54 / 3.51 /
/// 4.45. Other head widths keep 16-token chunks of 32 columns on eight
/// warps (the layout that needs the least shared memory): none of the
/// above was timed there. Each layout passed its check against the float64
/// backward before it was timed.
BackwardScheduleOptions chooseBackward(const Spec &spec) {
  BackwardScheduleOptions s;
  s.chunkSize = 16;
  s.tileV = std::min<int64_t>(spec.valueDim, 32);
  while (s.tileV > 8 && spec.valueDim % s.tileV != 0)
    s.tileV /= 2;
  s.warps = 8;
  bool measured =
      spec.keyDim == spec.valueDim && (spec.keyDim == 64 || spec.keyDim == 128);
  if (!measured)
    return s;
  bool dplr = spec.update == UpdateRule::DPLR;
  s.tileV = dplr ? 64 : spec.valueDim;
  if (spec.decay != DecayKind::PerChannel && !dplr) {
    s.chunkSize = 32;
    if (spec.dtype != DType::BF16)
      s.tileV = 64;
    return s;
  }
  s.warps = 16;
  if (spec.update == UpdateRule::Additive && spec.keyDim == 128)
    s.chunkSize = 32;
  return s;
}

ir::Strategy toIr(Strategy s) {
  switch (s) {
  case Strategy::FusedScan:
    return ir::Strategy::fused;
  case Strategy::Materialize:
    return ir::Strategy::materialize;
  case Strategy::Split:
    return ir::Strategy::split;
  }
  return ir::Strategy::fused;
}

Strategy fromIr(ir::Strategy s) {
  switch (s) {
  case ir::Strategy::fused:
    return Strategy::FusedScan;
  case ir::Strategy::materialize:
    return Strategy::Materialize;
  case ir::Strategy::split:
    return Strategy::Split;
  }
  return Strategy::FusedScan;
}

struct LinaChooseSchedule
    : public PassWrapper<LinaChooseSchedule, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(LinaChooseSchedule)

  LinaChooseSchedule() = default;
  LinaChooseSchedule(const LinaChooseSchedule &other) : PassWrapper(other) {}
  LinaChooseSchedule(const ChooseScheduleOptions &call) {
    arch = call.arch;
    smCount = call.smCount;
    sequences = call.sequences;
    seqLen = call.seqLen;
    backward = call.backward;
  }

  StringRef getArgument() const final { return "lina-choose-schedule"; }
  StringRef getDescription() const final {
    return "Choose each lina.recurrence's schedule for the call and GPU it "
           "is told of (chunk_size(...) schedule <...> on the op)";
  }
  void getDependentDialects(DialectRegistry &registry) const final {
    registry.insert<LinaDialect>();
  }

  Option<std::string> arch{*this, "arch",
                           llvm::cl::desc("The GPU's arch, e.g. sm_90 (\"\": "
                                          "unknown)"),
                           llvm::cl::init("")};
  Option<int64_t> smCount{*this, "sm-count",
                          llvm::cl::desc("The GPU's multiprocessors (0: "
                                         "unknown)"),
                          llvm::cl::init(0)};
  Option<int64_t> sequences{*this, "sequences",
                            llvm::cl::desc("Sequences in the call (0: "
                                           "unknown)"),
                            llvm::cl::init(0)};
  Option<int64_t> seqLen{*this, "seq-len",
                         llvm::cl::desc("Tokens a sequence, or the longest's "
                                        "(0: unknown)"),
                         llvm::cl::init(0)};
  Option<bool> backward{
      *this, "backward",
      llvm::cl::desc("Choose the backward's layout instead (chunk size, "
                     "tile-v and warps of its kernels, recorded as a "
                     "materialize schedule: the forward's part of a backward "
                     "writes each chunk's state); the call is not used"),
      llvm::cl::init(false)};

  void runOnOperation() final {
    if (sequences < 0 || smCount < 0 || seqLen < 0) {
      getOperation().emitError()
          << "lina-choose-schedule: sequences, sm-count and seq-len must "
             "not be negative (0: unknown)";
      return signalPassFailure();
    }
    getOperation().walk([&](RecurrenceOp op) {
      OpBuilder b(op);
      if (backward) {
        BackwardScheduleOptions s = chooseBackward(toSpec(op.getSpec()));
        op.setChunkSizeAttr(b.getI64IntegerAttr(s.chunkSize));
        op.setScheduleAttr(ScheduleAttr::get(
            op.getContext(), s.tileV, s.warps, ir::Strategy::materialize, false,
            false, false, false, 1, ir::Mma::warp));
        return;
      }
      ScheduleOptions s =
          chooseFor(toSpec(op.getSpec()), sequences, smCount, seqLen, arch);
      op.setChunkSizeAttr(b.getI64IntegerAttr(s.chunkSize));
      op.setScheduleAttr(ScheduleAttr::get(
          op.getContext(), s.tileV, s.warps, toIr(s.strategy), s.prefetch,
          s.sharedState, s.directDecay, s.twoCTAs, s.segments,
          s.warpgroup ? ir::Mma::warpgroup : ir::Mma::warp));
    });
  }
};

} // namespace

std::unique_ptr<Pass>
createLinaChooseSchedule(const ChooseScheduleOptions &call) {
  return std::make_unique<LinaChooseSchedule>(call);
}

namespace {

/// Runs lina-specialize, then lina-choose-schedule told of `call`, on a
/// module of `spec`'s recurrence (into `module`, of `ctx`): the op that
/// carries the choice, or null where a pass failed. The choice is made for
/// the spec lina-specialize makes, as the kernels are planned for it
/// (planChunkKernel, planBackwardKernel): KDA written in the DPLR form gets
/// KDA's.
RecurrenceOp chooseOnSpecialized(MLIRContext &ctx,
                                 OwningOpRef<ModuleOp> &module,
                                 const Spec &spec,
                                 const ChooseScheduleOptions &call) {
  module = buildSpecModule(ctx, spec);
  PassManager pm(&ctx);
  pm.addPass(createLinaSpecialize());
  pm.addPass(createLinaChooseSchedule(call));
  if (failed(pm.run(*module)))
    return nullptr;
  return *module->getOps<RecurrenceOp>().begin();
}

} // namespace

ScheduleOptions defaultSchedule(const Spec &spec) {
  return defaultSchedule(spec, 0, 0);
}

ScheduleOptions defaultSchedule(const Spec &spec, int64_t sequences,
                                int64_t smCount, int64_t seqLen,
                                const std::string &arch) {
  // No IR holds an invalid spec; nothing will be compiled for it either.
  if (!validate(spec).empty())
    return chooseFor(spec, sequences, smCount, seqLen, arch);
  MLIRContext ctx;
  ScopedDiagnosticHandler quiet(&ctx, [](Diagnostic &) { return success(); });
  OwningOpRef<ModuleOp> module;
  ChooseScheduleOptions call;
  call.arch = arch;
  call.smCount = smCount;
  call.sequences = sequences;
  call.seqLen = seqLen;
  RecurrenceOp op = chooseOnSpecialized(ctx, module, spec, call);
  if (!op)
    return chooseFor(specializedSpec(spec), sequences, smCount, seqLen, arch);
  ScheduleAttr chosen = op.getScheduleAttr();
  ScheduleOptions s;
  s.chunkSize = static_cast<int64_t>(*op.getChunkSize());
  s.tileV = chosen.getTileV();
  s.warps = chosen.getWarps();
  s.strategy = fromIr(chosen.getStrategy());
  s.prefetch = chosen.getPrefetch();
  s.sharedState = chosen.getSharedState();
  s.directDecay = chosen.getDirectDecay();
  s.twoCTAs = chosen.getTwoCtas();
  s.segments = chosen.getSegments();
  s.warpgroup = chosen.getMma() == ir::Mma::warpgroup;
  return s;
}

BackwardScheduleOptions defaultBackwardSchedule(const Spec &spec) {
  if (!validate(spec).empty())
    return chooseBackward(spec);
  MLIRContext ctx;
  ScopedDiagnosticHandler quiet(&ctx, [](Diagnostic &) { return success(); });
  OwningOpRef<ModuleOp> module;
  ChooseScheduleOptions call;
  call.backward = true;
  RecurrenceOp op = chooseOnSpecialized(ctx, module, spec, call);
  if (!op)
    return chooseBackward(specializedSpec(spec));
  BackwardScheduleOptions s;
  s.chunkSize = static_cast<int64_t>(*op.getChunkSize());
  s.tileV = op.getScheduleAttr().getTileV();
  s.warps = op.getScheduleAttr().getWarps();
  return s;
}

} // namespace lina
