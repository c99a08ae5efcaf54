//===- DecodeLoader.cpp - Decode kernels through the cubin cache -------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/DecodeLoader.h"

#include "lina/Autotune/DecodeTuning.h"
#include "lina/Autotune/KernelLoader.h"
#include "lina/Runtime/Device.h"

namespace lina {

std::string decodeImageKey(const DecodePlan &plan, const BuildTarget &target) {
  return sourceImageKey(plan.source, decodeCompileOptions(target.arch), target);
}

Expected<DecodeImage> buildDecodeImage(cache::Cache *cache,
                                       const DecodePlan &plan,
                                       const BuildTarget &target,
                                       const DecodeCompileFn &compile) {
  return buildSourceImage(cache, decodeImageKey(plan, target), plan.spec.name,
                          target.arch,
                          [&] { return compile(plan, target.arch); });
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
  Expected<DecodeKernel> kernel = loadSourceImage<DecodeKernel>(
      cache, *image, plan.spec.name, target.arch,
      [&] { return compileDecodePlan(plan, target.arch); },
      [&](const std::string &cubin) {
        return DecodeKernel::fromCubin(plan, cubin, ordinal);
      });
  // Knobs left open follow `lina tune --decode`'s results, per batch bucket.
  if (kernel.ok() && plan.schedule.warpColumns == 0 &&
      plan.schedule.warps == 0)
    kernel->setScheduleChooser(tunedDecodeChooser(
        cache, plan.spec, gpuIdentity(*device), target.nvrtcVersion));
  return kernel;
}

} // namespace lina
