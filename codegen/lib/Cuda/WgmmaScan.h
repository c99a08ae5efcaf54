//===- WgmmaScan.h - Plans the fused scan as warpgroup products -*- C++ -*-===//
//
// Part of lina. The schedule's wgmma flag: the additive rules and the
// delta rules with at most a scalar decay that the templates do not cover
// are printed from their ops (WarpgroupScan.h); for the delta rules as the
// presets spell them (no or a given scalar decay, bf16, d128) and the
// per-channel decays (KDA; GLA as the preset spells it),
// WgmmaDeltaScan.cuh's prepare kernel (the chunks' solves, stored;
// WgmmaKdaPrepare.cuh's for per-channel decays, which stores the chunk's
// scaled operands, and for GLA those alone) and scan.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_CODEGEN_CUDA_WGMMASCAN_H
#define LINA_CODEGEN_CUDA_WGMMASCAN_H

#include "SegmentCut.h"

#include "lina/Spec/Spec.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>

namespace lina::cuda {

/// Why the wgmma scan cannot run this spec at this schedule (naming the
/// field and what it must be), or "" when it can.
std::string wgmmaScanRefusal(const Spec &spec, int64_t chunkSize,
                             int64_t tileV, int64_t threads);

/// The additive scan's segment record (a chunk slot and value head, in
/// floats) at key dim `keyDim`: X = scale exp(G_t) q_t as 64 rows of keyDim
/// bf16, then the chunk's decay exp(G_{n-1}) (padded to a 16-byte word);
/// what the split strategy's combine and carry kernels read (Segments.cuh).
constexpr int64_t wgmmaSegmentRecordFloats(int64_t keyDim) {
  return 64 * keyDim / 2 + 4;
}
/// Where X and the decay are in that record.
SegmentCut wgmmaSegmentCut(int64_t keyDim = 128);

/// The delta rule's two kernels, or GLA's (WgmmaDeltaScan.cuh).
struct WgmmaDeltaKernels {
  int64_t scanSharedBytes = 0;    ///< dynamic
  int64_t prepareSharedBytes = 0; ///< dynamic
  int64_t recordFloats = 0;       ///< a (chunk slot, value head)'s record
};

/// Prints KDA's template pair, the prepare kernel `prepareName` (a CTA a
/// chunk: the chunk's scaled operands, P and the triangular solve into the
/// workspace) and its scan `scanName`; for GLA (the additive rule with a
/// per-channel decay) the prepare kernel stores the operands and P without
/// a solve.
WgmmaDeltaKernels printWgmmaDeltaScan(llvm::raw_ostream &os, const Spec &spec,
                                      const std::string &prepareName,
                                      const std::string &scanName);

} // namespace lina::cuda

#endif // LINA_CODEGEN_CUDA_WGMMASCAN_H
