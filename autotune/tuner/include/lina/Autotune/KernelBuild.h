//===- KernelBuild.h - A kernel's cubin, cached or built --------*- C++ -*-===//
//
// Part of lina. The warm start: a kernel's cubin and launch facts are looked
// up in the cubin cache under a key computed from the spec and schedule
// alone, so a hit needs neither the code generator nor NVRTC; a miss runs
// both and stores the result. The two slow steps are passed in, so tests can
// count them (a warm hit must call neither) and fake them without a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_KERNELBUILD_H
#define LINA_AUTOTUNE_KERNELBUILD_H

#include "lina/Autotune/Cache.h"
#include "lina/Codegen/KernelPlanner.h"

#include <functional>
#include <string>

namespace lina {

/// What the image is compiled for, besides the spec and schedule.
struct BuildTarget {
  std::string arch;         ///< e.g. "sm_90"
  std::string nvrtcVersion; ///< e.g. "13.0"
};

/// The slow steps. `plan` is codegen (planChunkKernel); `compile` is NVRTC,
/// returning the cubin for the arch; `specialize` (specializedSpec) gives a
/// cached image's plan the spec `plan` would have given it (none: the
/// caller's spec as it is).
struct BuildSteps {
  std::function<Expected<KernelPlan>(const Spec &, const ScheduleOptions &)>
      plan;
  std::function<Expected<std::string>(const KernelPlan &,
                                      const std::string &arch)>
      compile;
  std::function<Spec(const Spec &)> specialize;
};

struct BuiltImage {
  KernelPlan plan; ///< launch facts; the source is empty on a cache hit
  std::string cubin;
  std::string key; ///< the cubin cache key
  bool cacheHit = false;
  double lookupMs = 0, planMs = 0, compileMs = 0, storeMs = 0;
};

/// A digest of the sources that decide what the generator prints for a spec
/// and schedule (dialect, passes, codegen, the launch interface), made at
/// build time. It is part of the key because the key does not hash the
/// generated source: a lina built from other generator code must not load
/// this one's cubins.
const char *codegenFingerprint();

/// The cubin cache key of (spec, schedule, target): cache::cubinKey over the
/// canonical spec text, the schedule, the generator's fingerprint, the NVRTC
/// options, arch, NVRTC version and lina version.
std::string kernelImageKey(const Spec &spec, const ScheduleOptions &schedule,
                           const BuildTarget &target);

/// The image from `cache` (nullptr: no cache), or planned, compiled and
/// stored there. An unreadable cached image is rebuilt and replaced.
Expected<BuiltImage> buildKernelImage(cache::Cache *cache, const Spec &spec,
                                      const ScheduleOptions &schedule,
                                      const BuildTarget &target,
                                      const BuildSteps &steps);

} // namespace lina

#endif // LINA_AUTOTUNE_KERNELBUILD_H
