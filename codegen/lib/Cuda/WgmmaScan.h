//===- WgmmaScan.h - Plans the fused scan as warpgroup products -*- C++ -*-===//
//
// Part of lina. The schedule's wgmma flag: for the additive rules with at
// most a scalar decay, the fused kernel is WgmmaScan.cuh's template,
// instantiated for the spec's heads, gate and scale; for the delta rule
// with at most a scalar decay, WgmmaDeltaScan.cuh's prepare kernel (the
// chunks' solves, stored) and scan.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_CODEGEN_CUDA_WGMMASCAN_H
#define LINA_CODEGEN_CUDA_WGMMASCAN_H

#include "lina/Spec/Spec.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>

namespace lina::cuda {

/// Why the wgmma scan cannot run this spec at this schedule (naming the
/// field and what it must be), or "" when it can.
std::string wgmmaScanRefusal(const Spec &spec, int64_t chunkSize,
                             int64_t tileV, int64_t threads);

/// Prints the kernel `name` (the template's instantiation) and returns its
/// dynamic shared memory in bytes.
int64_t printWgmmaScan(llvm::raw_ostream &os, const Spec &spec,
                       const std::string &name);

/// The delta rule's two kernels (WgmmaDeltaScan.cuh).
struct WgmmaDeltaKernels {
  int64_t scanSharedBytes = 0; ///< dynamic; the prepare kernel's is static
  int64_t recordFloats = 0;    ///< a (chunk slot, value head)'s record
};

/// Prints the delta rule's prepare kernel `prepareName` (a CTA a chunk: the
/// triangular solve into the workspace) and its scan `scanName`.
WgmmaDeltaKernels printWgmmaDeltaScan(llvm::raw_ostream &os, const Spec &spec,
                                      const std::string &prepareName,
                                      const std::string &scanName);

} // namespace lina::cuda

#endif // LINA_CODEGEN_CUDA_WGMMASCAN_H
