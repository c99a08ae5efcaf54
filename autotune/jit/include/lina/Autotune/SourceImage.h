//===- SourceImage.h - Cubins kept under a key of their source --*- C++ -*-===//
//
// Part of lina. The warm start of kernels whose printed source names every
// choice made for them (the decode kernels, the backward's): the cubin is
// kept in lina's cache under a key of that source, its NVRTC options, the
// arch and NVRTC's version, so a process that ran once before loads it
// without NVRTC. The plan itself is cheap and always made.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_SOURCEIMAGE_H
#define LINA_AUTOTUNE_SOURCEIMAGE_H

#include "lina/Autotune/Cache.h"
#include "lina/Autotune/KernelBuild.h"
#include "lina/Runtime/Nvrtc.h"

#include <functional>
#include <string>

namespace lina {

/// The cubin cache key of `source` compiled with `options` for `target`
/// (cache::cubinKey; the lina version is part of every key).
std::string sourceImageKey(const std::string &source,
                           const cuda::CompileOptions &options,
                           const BuildTarget &target);

struct SourceImage {
  std::string cubin;
  std::string key;
  bool cacheHit = false;
};

/// `key`'s cubin from `cache` (nullptr: no cache), else `compile()`d and
/// stored there under the labels `specName` and `arch` (a failed store was
/// warned about by the cache and costs only the next process's compile).
Expected<SourceImage>
buildSourceImage(cache::Cache *cache, const std::string &key,
                 const std::string &specName, const std::string &arch,
                 const std::function<Expected<std::string>()> &compile);

/// Loads `image` with `load`; a cached cubin the driver refuses (or one
/// damaged in a way its checksum could not see) is compiled afresh and
/// replaces it.
template <typename Kernel>
Expected<Kernel>
loadSourceImage(cache::Cache *cache, const SourceImage &image,
                const std::string &specName, const std::string &arch,
                const std::function<Expected<std::string>()> &compile,
                const std::function<Expected<Kernel>(const std::string &)>
                    &load) {
  Expected<Kernel> kernel = load(image.cubin);
  if (kernel.ok() || !image.cacheHit)
    return kernel;
  Expected<std::string> cubin = compile();
  if (!cubin.ok())
    return cubin.status();
  kernel = load(*cubin);
  if (kernel.ok() && cache)
    cache->putCubin(image.key, *cubin, {specName, arch});
  return kernel;
}

} // namespace lina

#endif // LINA_AUTOTUNE_SOURCEIMAGE_H
