//===- KernelBuild.cpp - A kernel's cubin, from the cache or built -----===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/KernelBuild.h"

#include "lina/Autotune/KernelImage.h"
#include "lina/Autotune/ScheduleKnobs.h"

#include <chrono>

namespace lina {

namespace {

double msSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - start)
      .count();
}

} // namespace

std::string kernelImageKey(const Spec &spec, const ScheduleOptions &schedule,
                           const BuildTarget &target) {
  cache::CubinKeyParts parts;
  // In place of the source, what determines it: the spec (without its name,
  // which never reaches the source), every schedule field and the generator.
  // (v1 left out the flags, so --shared-state alone loaded the cubin cached
  // for the same knobs without it; v2 the segments.)
  parts.source = "lina-kernel-image-key-v3\nspec " +
                 cache::canonicalSpecText(spec) + "\nschedule";
  for (const ScheduleKnob &k : scheduleFields(spec))
    parts.source +=
        std::string(" ") + k.name + "=" + std::to_string(k.get(schedule));
  // Every spec's key names the segments (the rules that search them list
  // them among their knobs as well).
  parts.source += " segments=" + std::to_string(schedule.segments);
  parts.source += std::string("\ncodegen ") + codegenFingerprint();
  cuda::CompileOptions options = kernelCompileOptions(target.arch);
  parts.options = options.flags;
  parts.options.push_back("program-name=" + options.programName);
  parts.arch = target.arch;
  parts.nvrtcVersion = target.nvrtcVersion;
  return cache::cubinKey(parts);
}

Expected<BuiltImage> buildKernelImage(cache::Cache *cache, const Spec &spec,
                                      const ScheduleOptions &schedule,
                                      const BuildTarget &target,
                                      const BuildSteps &steps) {
  BuiltImage out;
  out.key = kernelImageKey(spec, schedule, target);
  auto start = std::chrono::steady_clock::now();
  if (cache) {
    if (std::optional<std::string> blob = cache->getCubin(out.key)) {
      // The plan is the specialized spec's, as one planned afresh is
      // (planChunkKernel), with the caller's beside it.
      if (std::optional<DecodedImage> d = decodeKernelImage(
              *blob, steps.specialize ? steps.specialize(spec) : spec)) {
        out.plan = std::move(d->plan);
        out.plan.written = spec;
        out.cubin = std::move(d->cubin);
        out.cacheHit = true;
        out.lookupMs = msSince(start);
        return out;
      }
    }
  }
  out.lookupMs = msSince(start);
  start = std::chrono::steady_clock::now();
  Expected<KernelPlan> plan = steps.plan(spec, schedule);
  if (!plan.ok())
    return plan.status();
  out.planMs = msSince(start);
  start = std::chrono::steady_clock::now();
  Expected<std::string> cubin = steps.compile(*plan, target.arch);
  if (!cubin.ok())
    return cubin.status();
  out.compileMs = msSince(start);
  out.plan = std::move(*plan);
  out.cubin = std::move(*cubin);
  if (cache) {
    start = std::chrono::steady_clock::now();
    // A failed write was warned about by the cache; the kernel still works.
    cache->putCubin(out.key, encodeKernelImage(out.plan, out.cubin),
                    {spec.name, target.arch});
    out.storeMs = msSince(start);
  }
  return out;
}

} // namespace lina
