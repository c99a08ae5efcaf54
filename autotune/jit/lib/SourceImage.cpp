//===- SourceImage.cpp - Cubins kept under a key of their source --------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/SourceImage.h"

#include "lina/Autotune/CacheKeys.h"

namespace lina {

std::string sourceImageKey(const std::string &source,
                           const cuda::CompileOptions &options,
                           const BuildTarget &target) {
  cache::CubinKeyParts parts;
  parts.source = source;
  parts.options = options.flags;
  parts.options.push_back("program-name=" + options.programName);
  parts.arch = target.arch;
  parts.nvrtcVersion = target.nvrtcVersion;
  return cache::cubinKey(parts);
}

Expected<SourceImage>
buildSourceImage(cache::Cache *cache, const std::string &key,
                 const std::string &specName, const std::string &arch,
                 const std::function<Expected<std::string>()> &compile) {
  SourceImage out;
  out.key = key;
  if (cache) {
    if (std::optional<std::string> cubin = cache->getCubin(key)) {
      out.cubin = std::move(*cubin);
      out.cacheHit = true;
      return out;
    }
  }
  Expected<std::string> cubin = compile();
  if (!cubin.ok())
    return cubin.status();
  out.cubin = std::move(*cubin);
  if (cache)
    cache->putCubin(key, out.cubin, {specName, arch});
  return out;
}

} // namespace lina
