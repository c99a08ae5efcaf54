//===- WgmmaScan.cpp - Plans the fused scan as warpgroup products -------===//
//
// Part of lina. See WgmmaScan.h.
//
//===----------------------------------------------------------------------===//
#include "WgmmaScan.h"
#include "WarpgroupScan.h"
#include "lina/Runtime/ChunkKernel.h"
#include "lina/Runtime/KernelForms.h"

#include "llvm/Support/FormatVariadic.h"

#include <cstdio>

namespace lina::cuda {

namespace {
/// A float literal that reads back as the same float.
std::string floatLiteral(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.9ef", v);
  return text;
}

/// The templates' fixed shape (WgmmaDeltaScan.cuh): 64-token chunks, K = V =
/// 128, two warpgroups of 64 value columns each.
constexpr int64_t kChunk = 64, kDim = 128, kThreads = 256;
/// Its kKdaRecordFloats: Q~, W and K~ (64 x 128 bf16 each), Tb and P (64 x
/// 64 bf16 each), the chunk's decay (128 floats) and padding to 1 KB.
constexpr int64_t kKdaRecordFloats = (3 * 16384 + 2 * 8192 + 1024) / 4;
/// Its kGlaRecordFloats: Q~ and K~ (64 x 128 bf16 each), P (64 x 64 bf16),
/// the chunk's decay (128 floats) and padding to 1 KB.
constexpr int64_t kGlaRecordFloats = (2 * 16384 + 8192 + 1024) / 4;
/// sizeof(kda_prepare_smem) (WgmmaKdaPrepare.cuh): the gates, the right
/// operand (fp32), A, the two left operands, P's image, the midpoints and
/// factors, beta and the norms, three vectors for the gates' halves.
constexpr int64_t kKdaPrepareSharedBytes =
    kChunk * kDim * 4 + kChunk * 136 * 4 + kChunk * 68 * 4 +
    2 * 16 * 136 * 2 + kChunk * kChunk * 2 + 2 * 4 * kDim * 4 +
    2 * kChunk * 4 + 3 * kDim * 4 + 16;
} // namespace

std::string wgmmaScanRefusal(const Spec &spec, int64_t chunkSize, int64_t tileV,
                             int64_t threads) {
  // The additive and delta rules are printed from their ops
  // (WarpgroupScan.h) where no template covers them: any write weight,
  // gates and betas given or computed; DPLR.
  if (wgmmaScanIsPrinted(spec))
    return warpgroupScanRefusal(spec, chunkSize, tileV, threads);
  const bool delta = spec.update == UpdateRule::Delta;
  if (spec.update != UpdateRule::Additive && !delta)
    return std::string("wgmma: the update rule must be additive, delta or "
                       "DPLR, a DPLR b decayed by its own per-channel gate "
                       "(low_rank_b = neg_decayed_key) aside (got ") +
           toString(spec.update) + " with decay " + toString(spec.decay) + ")";
  // The rest run a template, whose layout is fixed.
  if (chunkSize != kChunk || tileV != kDim || threads != kThreads)
    return llvm::formatv("wgmma: the schedule must be chunk size {0}, tile-v "
                         "{1} and {2} warps (got {3}, {4} and {5})",
                         kChunk, kDim, kThreads / 32, chunkSize, tileV,
                         threads / 32)
        .str();
  return "";
}

SegmentCut wgmmaSegmentCut(int64_t keyDim) {
  SegmentCut cut;
  cut.queryOffset = 0;
  cut.factorOffset = kChunk * keyDim / 2;
  cut.gateColumns = 1;
  return cut;
}

WgmmaDeltaKernels printWgmmaDeltaScan(llvm::raw_ostream &os, const Spec &spec,
                                      const std::string &prepareName,
                                      const std::string &scanName) {
  const bool delta = spec.update == UpdateRule::Delta;
  const char *norm = spec.qkL2Norm ? "true" : "false";
  const std::string scale = floatLiteral(spec.effectiveScale());
  WgmmaDeltaKernels kernels;
  // KDA's prepare kernel (WgmmaKdaPrepare.cuh), or GLA's (not delta: no
  // solve): ~106 KB of dynamic shared memory, two CTAs an SM.
  os << llvm::formatv(
      "extern \"C\" __global__ void __launch_bounds__({0}, 2) "
      "{1}(lina::Params p) {{\n  lina::wgmma_kda_prepare<{2}, {3}, {4}, "
      "{6}>(p, {5});\n}\nLINA_KERNEL_ENTRY({1})\n",
      kThreads, prepareName, spec.heads, spec.valueHeads, norm, scale,
      delta ? "true" : "false");
  os << llvm::formatv("static_assert(sizeof(lina::kda_prepare_smem) == {0}, "
                      "\"KDA's prepare kernel's shared memory\");\n",
                      kKdaPrepareSharedBytes);
  kernels.prepareSharedBytes = kKdaPrepareSharedBytes;
  // The scan twice: whole heads, and a CTA a value half for few heads
  // (the runtime picks at each launch; halvesKernelName).
  for (bool halves : {false, true})
    os << llvm::formatv(
        "extern \"C\" __global__ void __launch_bounds__({0}, 1) "
        "{1}(lina::Params p, const __grid_constant__ lina::wg_maps maps) "
        "{{\n  lina::wgmma_delta_scan<{2}, {3}, {4}, {5}>(p, maps);\n}\n"
        "LINA_KERNEL_ENTRY({1})\n",
        kThreads, halves ? halvesKernelName(scanName) : scanName, spec.heads,
        spec.valueHeads, halves ? "true" : "false", delta ? "true" : "false");
  // The runtime sizes the workspace with the host's count: NVRTC checks it.
  const int64_t recordFloats = delta ? kKdaRecordFloats : kGlaRecordFloats;
  os << llvm::formatv("static_assert(lina::{0} == {1}, \"the chunk's "
                      "record\");\n",
                      delta ? "kKdaRecordFloats" : "kGlaRecordFloats",
                      recordFloats);
  // WgmmaDeltaScan.cuh's layout: two stages of v's tile and a chunk's
  // record, two 64 x 72 output stagings and the TMA barriers; and 1024
  // bytes to align the swizzled tiles.
  constexpr int64_t tile = kChunk * kDim * 2;
  kernels.scanSharedBytes =
      2 * (tile + recordFloats * 4) + 2 * kChunk * 72 * 2 + 2 * 8 + 1024;
  kernels.recordFloats = recordFloats;
  return kernels;
}

} // namespace lina::cuda
