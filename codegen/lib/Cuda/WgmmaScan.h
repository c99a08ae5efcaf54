//===- WgmmaScan.h - Plans the fused scan as warpgroup products -*- C++ -*-===//
//
// Part of lina. The schedule's wgmma flag: for the additive rules with at
// most a scalar decay, the fused kernel is WgmmaScan.cuh's template,
// instantiated for the spec's heads, gate and scale.
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

} // namespace lina::cuda

#endif // LINA_CODEGEN_CUDA_WGMMASCAN_H
