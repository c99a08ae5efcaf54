//===- WgmmaScan.cpp - Plans the fused scan as warpgroup products -------===//
//
// Part of lina. See WgmmaScan.h.
//
//===----------------------------------------------------------------------===//
#include "WgmmaScan.h"
#include "WarpgroupScan.h"
#include "lina/Runtime/KernelForms.h"

namespace lina::cuda {

std::string wgmmaScanRefusal(const Spec &spec, int64_t chunkSize, int64_t tileV,
                             int64_t threads) {
  // Every rule the kernels printed from the ops cover (WarpgroupScan.h):
  // the additive and delta rules with any write weight, gates and betas
  // given or computed; DPLR.
  if (!wgmmaScanCoversRule(spec))
    return std::string("mma warpgroup: the update rule must be additive, "
                       "delta or DPLR, a DPLR b decayed by its own "
                       "per-channel gate (low_rank_b = neg_decayed_key) aside "
                       "(got ") +
           toString(spec.update) + " with decay " + toString(spec.decay) + ")";
  return warpgroupScanRefusal(spec, chunkSize, tileV, threads);
}

SegmentCut wgmmaSegmentCut(int64_t keyDim) {
  SegmentCut cut;
  cut.queryOffset = 0;
  cut.factorOffset = 64 * keyDim / 2;
  cut.gateColumns = 1;
  return cut;
}

} // namespace lina::cuda
