//===- DecodeLoader.cpp - Decode kernels through the cubin cache -------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/DecodeLoader.h"

#include "lina/Autotune/CacheKeys.h"
#include "lina/Autotune/DecodeTuning.h"
#include "lina/Autotune/KernelLoader.h"
#include "lina/Runtime/Device.h"

namespace lina {

std::string decodeImageKey(const DecodePlan &plan, const BuildTarget &target) {
  cuda::CompileOptions options = decodeCompileOptions(target.arch);
  cache::CubinKeyParts parts;
  parts.source = plan.source;
  parts.options = options.flags;
  parts.options.push_back("program-name=" + options.programName);
  parts.arch = target.arch;
  parts.nvrtcVersion = target.nvrtcVersion;
  return cache::cubinKey(parts);
}

Expected<DecodeImage> buildDecodeImage(cache::Cache *cache,
                                       const DecodePlan &plan,
                                       const BuildTarget &target,
                                       const DecodeCompileFn &compile) {
  DecodeImage out;
  out.key = decodeImageKey(plan, target);
  if (cache) {
    if (std::optional<std::string> cubin = cache->getCubin(out.key)) {
      out.cubin = std::move(*cubin);
      out.cacheHit = true;
      return out;
    }
  }
  Expected<std::string> cubin = compile(plan, target.arch);
  if (!cubin.ok())
    return cubin.status();
  out.cubin = std::move(*cubin);
  if (cache)
    cache->putCubin(out.key, out.cubin, {plan.spec.name, target.arch});
  return out;
}

Expected<DecodeKernel> loadDecodeKernel(const DecodePlan &plan, int ordinal) {
  Expected<cuda::Device> device = cuda::queryDevice(ordinal);
  if (!device.ok())
    return device.status();
  cache::Cache *cache = processCache();
  BuildTarget target{device->arch, nvrtcVersionString()};
  Expected<DecodeImage> image =
      buildDecodeImage(cache, plan, target, compileDecodePlan);
  if (!image.ok())
    return image.status();
  Expected<DecodeKernel> kernel =
      DecodeKernel::fromCubin(plan, image->cubin, ordinal);
  if (!kernel.ok() && image->cacheHit) {
    // A cubin this driver refuses (or one damaged in a way its checksum
    // could not see): compile afresh and replace the cached one.
    Expected<std::string> cubin = compileDecodePlan(plan, target.arch);
    if (!cubin.ok())
      return cubin.status();
    kernel = DecodeKernel::fromCubin(plan, *cubin, ordinal);
    if (kernel.ok() && cache)
      cache->putCubin(image->key, *cubin, {plan.spec.name, target.arch});
  }
  // Knobs left open follow `lina tune --decode`'s results, per batch bucket.
  if (kernel.ok() && plan.schedule.warpColumns == 0 &&
      plan.schedule.warps == 0)
    kernel->setScheduleChooser(tunedDecodeChooser(
        cache, plan.spec, gpuIdentity(*device), target.nvrtcVersion));
  return kernel;
}

} // namespace lina
