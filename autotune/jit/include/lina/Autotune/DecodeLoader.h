//===- DecodeLoader.h - Decode kernels through the cubin cache --*- C++ -*-===//
//
// Part of lina. The decode kernels' warm start, as KernelBuild.h is the
// chunk kernels': a decode plan's cubin is kept in lina's cache under a key
// of its source, so a serving process that has run once before loads its
// step kernel without NVRTC (which takes about a second per spec). The plan
// itself is cheap and always made; only the compile is skipped.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_DECODELOADER_H
#define LINA_AUTOTUNE_DECODELOADER_H

#include "lina/Autotune/Cache.h"
#include "lina/Autotune/KernelBuild.h"
#include "lina/Autotune/SourceImage.h"
#include "lina/Runtime/DecodeKernel.h"

#include <functional>
#include <string>

namespace lina {

/// The cubin cache key of `plan` for `target`: cache::cubinKey over the
/// plan's source, its NVRTC options, the arch and the NVRTC and lina
/// versions. The source names every choice of the plan, so unlike the chunk
/// kernels' key no fingerprint of the generator is needed.
std::string decodeImageKey(const DecodePlan &plan, const BuildTarget &target);

/// NVRTC, or a stand-in in tests.
using DecodeCompileFn = std::function<Expected<std::string>(
    const DecodePlan &, const std::string &arch)>;

using DecodeImage = SourceImage;

/// `plan`'s cubin from `cache` (nullptr: no cache), else compiled with
/// `compile` and stored there (a failed store was warned about by the cache
/// and costs only the next process's compile).
Expected<DecodeImage> buildDecodeImage(cache::Cache *cache,
                                       const DecodePlan &plan,
                                       const BuildTarget &target,
                                       const DecodeCompileFn &compile);

/// DecodeKernel::load through processCache() (LINA_CACHE=off: compiled every
/// time). A cached cubin the driver refuses is rebuilt and replaced. When the
/// plan leaves the schedule open, each call's schedule is `lina tune
/// --decode`'s for its batch bucket where the cache holds one
/// (DecodeTuning.h), else the by-batch default.
Expected<DecodeKernel> loadDecodeKernel(const DecodePlan &plan,
                                        int ordinal = 0);

} // namespace lina

#endif // LINA_AUTOTUNE_DECODELOADER_H
