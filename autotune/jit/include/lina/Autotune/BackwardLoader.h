//===- BackwardLoader.h - Backward kernels through the cubin cache -*- C++ -*-===//
//
// Part of lina. The backward's warm start, as DecodeLoader.h is decode's: a
// backward plan's cubin is kept in lina's cache under a key of its source
// (SourceImage.h), so a training process that ran once before loads its
// backward without NVRTC (2 to 10 seconds a spec).
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_BACKWARDLOADER_H
#define LINA_AUTOTUNE_BACKWARDLOADER_H

#include "lina/Autotune/SourceImage.h"
#include "lina/Runtime/BackwardKernel.h"

#include <functional>
#include <string>

namespace lina {

/// The cubin cache key of `plan` for `target`: its source under the chunk
/// kernels' NVRTC options (kernelCompileOptions), the arch, the NVRTC and
/// lina versions.
std::string backwardImageKey(const BackwardPlan &plan,
                             const BuildTarget &target);

/// NVRTC (compileBackwardPlan), or a stand-in in tests.
using BackwardCompileFn = std::function<Expected<std::string>(
    const BackwardPlan &, const std::string &arch)>;

/// `plan`'s cubin from `cache` (nullptr: no cache), else compiled with
/// `compile` and stored there.
Expected<SourceImage> buildBackwardImage(cache::Cache *cache,
                                         const BackwardPlan &plan,
                                         const BuildTarget &target,
                                         const BackwardCompileFn &compile);

/// BackwardKernel::load through processCache() (LINA_CACHE=off: compiled
/// every time). A cached cubin the driver refuses is rebuilt and replaced.
Expected<BackwardKernel> loadBackwardKernel(const BackwardPlan &plan,
                                            int ordinal = 0);

} // namespace lina

#endif // LINA_AUTOTUNE_BACKWARDLOADER_H
