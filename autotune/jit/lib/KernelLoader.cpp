//===- KernelLoader.cpp - Spec to loaded kernel, through the cache -----===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/KernelLoader.h"

#include "lina/Autotune/KernelImage.h"
#include "lina/Runtime/Emulation.h"
#include "lina/Runtime/Nvrtc.h"
#include "lina/Transforms/Pipeline.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <mutex>
#include <strings.h>

namespace lina {

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start)
      .count();
}

} // namespace

ScheduleOptions shapeDefaultSchedule(const Spec &spec, int64_t batch,
                                     int device, int64_t seqLen) {
  if (batch <= 0) // no grid to fit: no need to ask the driver
    return defaultSchedule(spec);
  Expected<cuda::Device> d = cuda::queryDevice(device);
  return d.ok() ? defaultSchedule(spec, batch, d->smCount, seqLen, d->arch)
                : defaultSchedule(spec);
}

bool cacheEnabledByEnvironment() {
  // The emulated device's kernels are host code: never kept with cubins.
  if (cuda::emulation::enabled())
    return false;
  const char *v = std::getenv("LINA_CACHE");
  if (!v)
    return true;
  for (const char *off : {"0", "off", "no", "false"})
    if (strcasecmp(v, off) == 0)
      return false;
  return true;
}

cache::Cache *processCache() {
  // Opened once and never closed: kernels may be created until exit, and
  // SQLite needs nothing flushed (every write is its own transaction).
  static cache::Cache *cache =
      cacheEnabledByEnvironment()
          ? new cache::Cache(cache::Cache::openDefault())
          : nullptr;
  return cache;
}

BuildSteps defaultBuildSteps() {
  BuildSteps steps;
  steps.plan = [](const Spec &spec, const ScheduleOptions &schedule) {
    return planChunkKernel(spec, schedule);
  };
  steps.specialize = [](const Spec &spec) { return specializedSpec(spec); };
  steps.compile = [](const KernelPlan &plan,
                     const std::string &arch) -> Expected<std::string> {
    LINA_RETURN_IF_ERROR(checkKernelArch(plan, arch, "this GPU"));
    const cuda::Nvrtc &nvrtc = cuda::Nvrtc::get();
    if (!nvrtc.available())
      return nvrtc.status();
    Expected<cuda::CompiledKernel> compiled =
        nvrtc.compile(plan.source, kernelCompileOptions(plan, arch));
    if (!compiled.ok())
      return compiled.status();
    return std::move(compiled->cubin);
  };
  return steps;
}

GpuIdentity gpuIdentity(const cuda::Device &device) {
  return {device.name, device.arch, device.smCount,
          driverVersionString(device.driverVersion)};
}

std::string nvrtcVersionString() {
  const cuda::Nvrtc &nvrtc = cuda::Nvrtc::get();
  if (!nvrtc.available())
    return "unavailable";
  Expected<cuda::NvrtcVersion> v = nvrtc.version();
  return v.ok() ? v->str() : "unavailable";
}

namespace {

Expected<ChunkKernel> load(const KernelRequest &request,
                           cache::Cache *(*getCache)(void *), void *context,
                           LoadReport *report) {
  LoadReport local;
  LoadReport &r = report ? *report : local;
  r = LoadReport();
  Clock::time_point begin = Clock::now(), start = begin;
  // NVRTC's version is part of both keys; loading the library (tens of ms)
  // overlaps the driver's start-up instead of following it.
  std::future<std::string> nvrtcVersion =
      std::async(std::launch::async, nvrtcVersionString);
  Expected<cuda::Device> device = cuda::queryDevice(request.device);
  if (!device.ok()) {
    // A schedule that cannot work is the caller's mistake to hear about
    // first, with or without a GPU (planning costs nothing on this path).
    if (request.schedule) {
      Expected<KernelPlan> plan =
          planChunkKernel(request.spec, *request.schedule);
      if (!plan.ok())
        return plan.status();
    }
    return device.status();
  }
  // The primary context is made here rather than inside the module load,
  // so that the report tells the driver's share from lina's.
  Status current = cuda::makeCurrent(request.device);
  if (!current.ok())
    return current;
  r.deviceMs = msSince(start);
  cache::Cache *cache = getCache(context);
  r.cacheEnabled = cache != nullptr;
  start = Clock::now();
  BuildTarget target{device->arch, nvrtcVersion.get()};
  r.nvrtcMs = msSince(start);

  std::optional<TunedChoice> tuned;
  if (request.schedule) {
    r.schedule = *request.schedule;
    r.scheduleSource = "given";
  } else {
    r.schedule = defaultSchedule(request.spec, request.batch, device->smCount,
                                 request.seqLen, device->arch);
    r.scheduleSource = "default";
    if (cache && request.batch > 0 && request.seqLen > 0) {
      start = Clock::now();
      tuned = lookupTuned(*cache, request.spec, gpuIdentity(*device),
                          target.nvrtcVersion, request.batch, request.seqLen);
      r.tunedMs = msSince(start);
      if (tuned) {
        r.schedule = tuned->schedule;
        r.scheduleSource = tuned->source == TunedSource::Exact
                               ? "tuned"
                               : "tuned (for a spec that differs only in "
                                 "flags: lina tune this spec for its own)";
      }
    }
  }

  BuildSteps steps = defaultBuildSteps();
  Expected<BuiltImage> image =
      buildKernelImage(cache, request.spec, r.schedule, target, steps);
  if (!image.ok() && tuned) {
    // A recorded winner that no longer builds (an imported cache, a
    // generator that changed under the same version) must not make a
    // working spec fail: the default always was the fallback.
    r.schedule = defaultSchedule(request.spec, request.batch, device->smCount,
                                 request.seqLen, device->arch);
    r.scheduleSource = "default (the tuned schedule failed to build)";
    image = buildKernelImage(cache, request.spec, r.schedule, target, steps);
  }
  if (!image.ok())
    return image.status();
  r.cacheHit = image->cacheHit;
  r.lookupMs = image->lookupMs;
  r.planMs = image->planMs;
  r.compileMs = image->compileMs;
  r.storeMs = image->storeMs;
  start = Clock::now();
  Expected<ChunkKernel> kernel =
      ChunkKernel::loadImage(image->plan, image->cubin, request.device);
  if (!kernel.ok() && image->cacheHit) {
    // A cubin this driver refuses (or one damaged in a way its checksum
    // could not see): build it afresh and replace the cached one.
    Expected<BuiltImage> rebuilt =
        buildKernelImage(nullptr, request.spec, r.schedule, target, steps);
    if (!rebuilt.ok())
      return rebuilt.status();
    r.cacheHit = false;
    r.planMs = rebuilt->planMs;
    r.compileMs = rebuilt->compileMs;
    kernel =
        ChunkKernel::loadImage(rebuilt->plan, rebuilt->cubin, request.device);
    if (kernel.ok() && cache)
      cache->putCubin(rebuilt->key,
                      encodeKernelImage(rebuilt->plan, rebuilt->cubin),
                      {request.spec.name, target.arch});
  }
  r.loadMs = msSince(start);
  r.totalMs = msSince(begin);
  return kernel;
}

} // namespace

Expected<ChunkKernel> loadKernel(const KernelRequest &request,
                                 LoadReport *report) {
  return load(
      request, [](void *) { return processCache(); }, nullptr, report);
}

Expected<ChunkKernel> loadKernelWithCache(const KernelRequest &request,
                                          cache::Cache *cache,
                                          LoadReport *report) {
  return load(
      request, [](void *c) { return static_cast<cache::Cache *>(c); }, cache,
      report);
}

} // namespace lina
