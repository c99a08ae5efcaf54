//===- SmCapacity.h - What an sm_90 multiprocessor holds --------*- C++ -*-===//
//
// Part of lina. The kernels' printers size their __launch_bounds__ minimums
// and their fetch rings by the CTAs an SM's shared memory holds.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_CODEGEN_CUDA_SMCAPACITY_H
#define LINA_CODEGEN_CUDA_SMCAPACITY_H

#include <cstdint>

namespace lina::cuda {

/// The CTAs of a kernel with `bytes` of shared memory an sm_90
/// multiprocessor holds (228 KiB, 1 KiB of it reserved for each CTA).
inline int64_t ctasBySharedMemory(int64_t bytes) {
  return 233472 / (bytes + 1024);
}

} // namespace lina::cuda

#endif // LINA_CODEGEN_CUDA_SMCAPACITY_H
