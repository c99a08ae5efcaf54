//===- KernelImage.h - A cubin with the launch facts it needs ---*- C++ -*-===//
//
// Part of lina. What the cubin cache stores for a kernel: the cubin and the
// facts of its KernelPlan that launching needs (strategy, chunk size, tile-v,
// threads, kernel names, shared memory). With both, a warm process loads a
// kernel without running the code generator or NVRTC.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_KERNELIMAGE_H
#define LINA_AUTOTUNE_KERNELIMAGE_H

#include "lina/Runtime/ChunkKernel.h"

#include <optional>
#include <string>

namespace lina {

/// A text header (one "name=value" line per launch fact) and the cubin
/// after a blank line. The source is not stored: it can be regenerated.
std::string encodeKernelImage(const KernelPlan &plan, const std::string &cubin);

/// The plan (with `spec` and an empty source) and cubin of an encoded image,
/// or nullopt when it is not one this build wrote (then it is rebuilt).
struct DecodedImage {
  KernelPlan plan;
  std::string cubin;
};
std::optional<DecodedImage> decodeKernelImage(const std::string &image,
                                              const Spec &spec);

} // namespace lina

#endif // LINA_AUTOTUNE_KERNELIMAGE_H
