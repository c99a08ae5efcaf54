//===- BackwardLoader.cpp - Backward kernels through the cubin cache ----===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/BackwardLoader.h"

#include "lina/Autotune/KernelLoader.h"
#include "lina/Runtime/Device.h"

namespace lina {

std::string backwardImageKey(const BackwardPlan &plan,
                             const BuildTarget &target) {
  return sourceImageKey(plan.source, kernelCompileOptions(target.arch),
                        target);
}

Expected<SourceImage> buildBackwardImage(cache::Cache *cache,
                                         const BackwardPlan &plan,
                                         const BuildTarget &target,
                                         const BackwardCompileFn &compile) {
  return buildSourceImage(cache, backwardImageKey(plan, target),
                          plan.spec.name, target.arch,
                          [&] { return compile(plan, target.arch); });
}

Expected<BackwardKernel> loadBackwardKernel(const BackwardPlan &plan,
                                            int ordinal) {
  Expected<cuda::Device> device = cuda::queryDevice(ordinal);
  if (!device.ok())
    return device.status();
  cache::Cache *cache = processCache();
  BuildTarget target{device->arch, nvrtcVersionString()};
  Expected<SourceImage> image =
      buildBackwardImage(cache, plan, target, compileBackwardPlan);
  if (!image.ok())
    return image.status();
  return loadSourceImage<BackwardKernel>(
      cache, *image, plan.spec.name, target.arch,
      [&] { return compileBackwardPlan(plan, target.arch); },
      [&](const std::string &cubin) {
        return BackwardKernel::fromCubin(plan, cubin, ordinal);
      });
}

} // namespace lina
