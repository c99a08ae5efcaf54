//===- KernelLoader.h - Spec to loaded kernel, via the cache ----*- C++ -*-===//
//
// Part of lina. How the C API, the C++ API and `lina run` get a kernel:
// pick the schedule (the caller's; else the tuned winner for this spec, GPU
// and shape bucket; else defaultSchedule), then load its cubin from the
// cache or build it (codegen + NVRTC) and store it. A tune never runs here:
// a lookup that finds nothing costs one query and uses the default.
//
// The cache is $LINA_CACHE_DIR/lina.db (CacheLocation.h); LINA_CACHE=off
// (or 0, no, false) turns it off for the process: every kernel is built, no
// tuned schedule is used.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_KERNELLOADER_H
#define LINA_AUTOTUNE_KERNELLOADER_H

#include "lina/Autotune/Cache.h"
#include "lina/Autotune/KernelBuild.h"
#include "lina/Autotune/TunedLookup.h"
#include "lina/Runtime/Device.h"

#include <optional>
#include <string>

namespace lina {

struct KernelRequest {
  Spec spec;
  /// The caller's schedule; nullopt: tuned, else default.
  std::optional<ScheduleOptions> schedule;
  /// The shape the kernel is for (sequences, longest sequence), for the
  /// tuned lookup; 0 when unknown (then the default is used).
  int64_t batch = 0, seqLen = 0;
  int device = 0;
};

/// Where the time to a loaded kernel went.
struct LoadReport {
  ScheduleOptions schedule;
  /// "given", "tuned" or "default" (with the reason when a tuned schedule
  /// failed to build and the default stood in).
  std::string scheduleSource;
  bool cacheEnabled = false, cacheHit = false;
  double deviceMs = 0; ///< driver init, device query, primary context
  /// Waiting for NVRTC's version (the keys need it), loaded while the
  /// driver starts.
  double nvrtcMs = 0;
  double tunedMs = 0; ///< the tuned-schedule lookup
  double lookupMs = 0, planMs = 0, compileMs = 0, storeMs = 0;
  double loadMs = 0; ///< cuModuleLoadData and the kernel handles
  double totalMs = 0;
};

/// False when LINA_CACHE turns the cache off.
bool cacheEnabledByEnvironment();

/// The process's cache, opened on first use (thread-safe); nullptr when
/// LINA_CACHE turns it off.
cache::Cache *processCache();

/// The real steps: planChunkKernel and NVRTC with kernelCompileOptions.
BuildSteps defaultBuildSteps();

/// The GPU facts of a tuning key.
GpuIdentity gpuIdentity(const cuda::Device &device);

/// NVRTC's version as the keys spell it ("13.0"), "unavailable" without it.
std::string nvrtcVersionString();

/// Picks the schedule and loads the kernel through processCache(), which is
/// opened only once a GPU is found (a machine without one gets its error
/// without a cache file being made). A cached cubin the driver refuses is
/// rebuilt and replaced.
Expected<ChunkKernel> loadKernel(const KernelRequest &request,
                                 LoadReport *report = nullptr);

/// The schedule the loader starts from for `batch` sequences of `spec` on
/// GPU `device`: defaultSchedule(spec, batch, SMs), or defaultSchedule(spec)
/// when batch is 0 or the device does not answer. What a caller that fixes
/// some knobs (`lina run --chunk-size 32`, the C API with some fields set)
/// should fill the others from, so that one knob changes one thing.
ScheduleOptions shapeDefaultSchedule(const Spec &spec, int64_t batch,
                                     int device, int64_t seqLen = 0);

/// As loadKernel, through `cache` (nullptr: none).
Expected<ChunkKernel> loadKernelWithCache(const KernelRequest &request,
                                          cache::Cache *cache,
                                          LoadReport *report = nullptr);

} // namespace lina

#endif // LINA_AUTOTUNE_KERNELLOADER_H
