//===- WgmmaScan.h - Plans the fused scan as warpgroup products -*- C++ -*-===//
//
// Part of lina. The schedule's `mma = warpgroup`: the Hopper kernels of every
// rule it covers are printed from the chunk's ops (WarpgroupScan.h): one fused
// scan for the additive rules with at most a scalar decay (with segments,
// also storing what the combine and carry kernels read), and for the delta
// and DPLR rules and the per-channel decays a prepare kernel that stores
// each chunk's record, then the scan.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_CODEGEN_CUDA_WGMMASCAN_H
#define LINA_CODEGEN_CUDA_WGMMASCAN_H

#include "SegmentCut.h"

#include "lina/Spec/Spec.h"

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

} // namespace lina::cuda

#endif // LINA_CODEGEN_CUDA_WGMMASCAN_H
