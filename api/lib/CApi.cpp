//===- CApi.cpp - The C API over the JIT -------------------------------===//
//
// Part of lina. Every entry point catches everything: no C++ exception and
// no abort crosses into the caller. Kernels are cached in memory per (spec,
// schedule, device) so that frameworks can ask for one on every call; across
// processes the cubin cache (KernelLoader.h) skips codegen and NVRTC.
//
//===----------------------------------------------------------------------===//
#include "lina/lina_c.h"

#include "CApiSupport.h"

#include "lina/Autotune/CacheKeys.h"
#include "lina/Autotune/KernelLoader.h"
#include "lina/Autotune/ScheduleKnobs.h"
#include "lina/Codegen/KernelPlanner.h"
#include "lina/Dialect/Lina/IR/SpecConversion.h"
#include "lina/Dialect/Lina/IR/Spelling.h"
#include "lina/Runtime/ChunkKernel.h"
#include "lina/Runtime/ForwardChecks.h"
#include "lina/Spec/Presets.h"
#include "lina/Transforms/Pipeline.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>

struct lina_kernel {
  std::shared_ptr<lina::ChunkKernel> kernel;
  /// What it was built with; the plan holds the launch geometry only, not
  /// knobs such as prefetch that change just the source.
  lina::ScheduleOptions schedule;
};

using namespace lina::capi;

namespace {

/// Compiled kernels by (printed spec, schedule, device): compiling is the
/// slow part, and a framework binding asks on every call.
std::mutex cacheMutex;
std::map<std::string, lina_kernel> &kernelCache() {
  static auto *cache = new std::map<std::string, lina_kernel>();
  return *cache;
}

/// The caller's schedule, or nullopt when it sets no knob (then the loader
/// picks the tuned or the default one). The knobs it leaves unset come from
/// the loader's default for `batch` sequences on `device` (the spec's
/// default when batch is 0).
std::optional<lina::ScheduleOptions> scheduleFor(const lina::Spec &spec,
                                                 const lina_schedule *s,
                                                 int64_t batch = 0,
                                                 int device = 0,
                                                 int64_t seqLen = 0) {
  if (!s || (s->chunk_size <= 0 && s->tile_v <= 0 && s->warps <= 0 &&
             s->strategy == LINA_STRATEGY_DEFAULT &&
             s->prefetch == LINA_PREFETCH_DEFAULT && s->segments <= 0 &&
             s->mma == LINA_MMA_DEFAULT))
    return std::nullopt;
  // The warpgroup scan's layout is fixed: asked for, the other knobs go on top
  // of it (the planner names any that disagree); otherwise knobs of the
  // caller's own start from the default without it.
  lina::ScheduleOptions base =
      lina::shapeDefaultSchedule(spec, batch, device, seqLen);
  lina::ScheduleOptions o = s->mma == LINA_MMA_WARPGROUP
                                ? lina::withWarpgroup(base, spec)
                                : lina::withoutWarpgroup(base);
  if (s->chunk_size > 0)
    o.chunkSize = s->chunk_size;
  if (s->tile_v > 0)
    o.tileV = s->tile_v;
  if (s->warps > 0)
    o.warps = s->warps;
  if (s->strategy == LINA_STRATEGY_FUSED)
    o.strategy = lina::Strategy::FusedScan;
  else if (s->strategy == LINA_STRATEGY_MATERIALIZE)
    o.strategy = lina::Strategy::Materialize;
  else if (s->strategy == LINA_STRATEGY_SPLIT)
    o.strategy = lina::Strategy::Split;
  if (s->prefetch != LINA_PREFETCH_DEFAULT)
    o.prefetch = s->prefetch == LINA_PREFETCH_ON;
  if (s->segments > 0)
    o.segments = s->segments;
  return o;
}

/// Which schedule the loader chose for (spec, shape bucket, device) when the
/// caller left it open: remembered, so that asking again costs no query of
/// the tuning table.
std::map<std::string, lina::ScheduleOptions> &chosenSchedules() {
  static auto *chosen = new std::map<std::string, lina::ScheduleOptions>();
  return *chosen;
}

} // namespace

void lina::capi::forgetChosenSchedules() {
  std::lock_guard<std::mutex> lock(cacheMutex);
  chosenSchedules().clear();
}

namespace {

lina_status createKernel(const char *spec_text, const lina_schedule *schedule,
                         int64_t batch, int64_t seq_len, int device,
                         lina_kernel **out) {
  if (!spec_text || !out)
    return fail(LINA_INVALID_ARGUMENT,
                "lina_kernel_create: spec_text and out must not be NULL");
  *out = nullptr;
  if (batch < 0 || seq_len < 0)
    return fail(LINA_INVALID_ARGUMENT,
                "lina_kernel_create_for_shape: batch and seq_len must not be "
                "negative");
  lina::Spec spec;
  std::string error;
  if (!lina::parseSpecText(spec_text, "spec", spec, error))
    return fail(LINA_INVALID_ARGUMENT, error);
  lina::KernelRequest request;
  request.spec = spec;
  request.schedule = scheduleFor(spec, schedule, batch, device, seq_len);
  request.batch = batch;
  request.seqLen = seq_len;
  request.device = device;
  std::string printed = lina::printSpecModule(spec);
  std::string choiceKey;
  std::lock_guard<std::mutex> lock(cacheMutex);
  if (!request.schedule && batch > 0 && seq_len > 0) {
    choiceKey = printed + "|" +
                lina::cache::shapeBucket(batch, seq_len, spec.valueHeads)
                    .str() +
                "|" + std::to_string(device);
    auto chosen = chosenSchedules().find(choiceKey);
    if (chosen != chosenSchedules().end())
      request.schedule = chosen->second;
  } else if (!request.schedule) {
    request.schedule = lina::defaultSchedule(spec);
  }
  std::string key;
  if (request.schedule) {
    key = printed + "|" + lina::describe(*request.schedule) + "|" +
          std::to_string(device);
    auto found = kernelCache().find(key);
    if (found != kernelCache().end()) {
      *out = new lina_kernel(found->second);
      lastError.clear();
      return LINA_OK;
    }
  }
  lina::LoadReport report;
  lina::Expected<lina::ChunkKernel> kernel =
      lina::loadKernel(request, &report);
  if (!kernel.ok())
    return fromStatus(kernel.status());
  if (!choiceKey.empty())
    chosenSchedules()[choiceKey] = report.schedule;
  key = printed + "|" + lina::describe(report.schedule) + "|" +
        std::to_string(device);
  auto found =
      kernelCache()
          .emplace(key, lina_kernel{std::make_shared<lina::ChunkKernel>(
                                        std::move(*kernel)),
                                    report.schedule})
          .first;
  *out = new lina_kernel(found->second);
  lastError.clear();
  return LINA_OK;
}

} // namespace

extern "C" {

const char *lina_last_error(void) { return lastError.c_str(); }

const char *lina_status_name(lina_status status) {
  switch (status) {
  case LINA_OK:
    return "LINA_OK";
  case LINA_INVALID_ARGUMENT:
    return "LINA_INVALID_ARGUMENT";
  case LINA_NO_DRIVER:
    return "LINA_NO_DRIVER";
  case LINA_DRIVER_ERROR:
    return "LINA_DRIVER_ERROR";
  case LINA_NO_COMPILER:
    return "LINA_NO_COMPILER";
  case LINA_COMPILE_ERROR:
    return "LINA_COMPILE_ERROR";
  case LINA_INTERNAL_ERROR:
    return "LINA_INTERNAL_ERROR";
  }
  return "LINA_UNKNOWN_STATUS";
}

// The CMake project version, as the cache keys hold it.
const char *lina_version(void) { return lina::cache::linaVersion(); }

lina_status lina_kernel_create(const char *spec_text,
                               const lina_schedule *schedule, int device,
                               lina_kernel **out) {
  return guarded(
      [&] { return createKernel(spec_text, schedule, 0, 0, device, out); });
}

lina_status lina_kernel_create_for_shape(const char *spec_text,
                                         const lina_schedule *schedule,
                                         int64_t batch, int64_t seq_len,
                                         int device, lina_kernel **out) {
  return guarded([&] {
    return createKernel(spec_text, schedule, batch, seq_len, device, out);
  });
}

lina_status lina_kernel_schedule(const lina_kernel *kernel,
                                 lina_schedule *out) {
  return guarded([&] {
    if (!kernel || !kernel->kernel || !out)
      return fail(LINA_INVALID_ARGUMENT,
                  "lina_kernel_schedule: kernel and out must not be NULL");
    const lina::KernelPlan &plan = kernel->kernel->plan();
    const lina::ScheduleOptions &schedule = kernel->schedule;
    out->chunk_size = plan.chunkSize;
    out->tile_v = plan.tileV;
    out->warps = plan.threads / 32;
    // The schedule's strategy: a warpgroup plan's kernels may be split (the
    // delta rules' solves, segments) where its schedule is fused.
    const lina::Strategy strategy =
        schedule.warpgroup ? schedule.strategy : plan.strategy;
    out->strategy = strategy == lina::Strategy::FusedScan
                        ? LINA_STRATEGY_FUSED
                    : strategy == lina::Strategy::Materialize
                        ? LINA_STRATEGY_MATERIALIZE
                        : LINA_STRATEGY_SPLIT;
    out->prefetch = schedule.prefetch ? LINA_PREFETCH_ON : LINA_PREFETCH_OFF;
    out->segments = plan.segments;
    out->mma = schedule.warpgroup ? LINA_MMA_WARPGROUP : LINA_MMA_WARP;
    lastError.clear();
    return LINA_OK;
  });
}

lina_status lina_shape_bucket(int64_t batch, int64_t seq_len,
                              int64_t value_heads, char *buf, size_t size) {
  return guarded([&] {
    if (!buf)
      return fail(LINA_INVALID_ARGUMENT, "lina_shape_bucket: buf is NULL");
    // A call of no tokens is valid (and lands in the first bucket); no
    // count is negative.
    if (batch < 1 || seq_len < 0 || value_heads < 1)
      return fail(LINA_INVALID_ARGUMENT,
                  "lina_shape_bucket: batch and value_heads must be at least "
                  "1 and seq_len at least 0, got " +
                      std::to_string(batch) + ", " + std::to_string(seq_len) +
                      ", " + std::to_string(value_heads));
    std::string text =
        lina::cache::shapeBucket(batch, seq_len, value_heads).str();
    if (text.size() + 1 > size)
      return fail(LINA_INVALID_ARGUMENT,
                  "lina_shape_bucket: the bucket needs " +
                      std::to_string(text.size() + 1) + " bytes, buf has " +
                      std::to_string(size));
    std::memcpy(buf, text.c_str(), text.size() + 1);
    lastError.clear();
    return LINA_OK;
  });
}

lina_status lina_preset_spec(const char *preset, int64_t key_dim,
                             int64_t value_dim, int64_t heads,
                             int64_t value_heads, const char *dtype,
                             char **out) {
  return guarded([&] {
    if (!preset || !dtype || !out)
      return fail(LINA_INVALID_ARGUMENT,
                  "lina_preset_spec: preset, dtype and out must not be NULL");
    std::optional<lina::Preset> p = lina::findPreset(preset);
    if (!p) {
      std::string suggestion = lina::suggestPreset(preset);
      return fail(LINA_INVALID_ARGUMENT,
                  std::string("unknown preset '") + preset + "'" +
                      (suggestion.empty() ? "" : "; " + suggestion));
    }
    std::optional<lina::DType> d = lina::parseDType(dtype);
    if (!d)
      return fail(LINA_INVALID_ARGUMENT,
                  std::string("dtype must be bf16, f16 or f32, got '") +
                      dtype + "'");
    lina::Spec spec = p->spec;
    spec.keyDim = key_dim;
    spec.valueDim = value_dim;
    spec.heads = heads;
    spec.valueHeads = value_heads;
    spec.dtype = *d;
    std::vector<std::string> errors = lina::validate(spec);
    if (!errors.empty())
      return fail(LINA_INVALID_ARGUMENT, "invalid spec: " + errors.front());
    std::string text = lina::printSpecModule(spec);
    *out = static_cast<char *>(std::malloc(text.size() + 1));
    if (!*out)
      return fail(LINA_INTERNAL_ERROR, "out of memory");
    std::memcpy(*out, text.c_str(), text.size() + 1);
    lastError.clear();
    return LINA_OK;
  });
}

void lina_free_string(char *text) { std::free(text); }

lina_status lina_kernel_forward(const lina_kernel *kernel,
                                const lina_forward_args *a) {
  return guarded([&] {
    if (!kernel || !kernel->kernel || !a)
      return fail(LINA_INVALID_ARGUMENT,
                  "lina_kernel_forward: kernel and args must not be NULL");
    return fromStatus(kernel->kernel->forward(toForwardArgs(*a)));
  });
}

lina_status lina_kernel_workspace_size(const lina_kernel *kernel,
                                       int64_t batch, int64_t seq_len,
                                       int64_t num_sequences, size_t *bytes) {
  return workspaceSize("lina_kernel_workspace_size", kernel, batch, seq_len,
                       num_sequences, bytes);
}

lina_status lina_kernel_forward_with_workspace(const lina_kernel *kernel,
                                               const lina_forward_args *a,
                                               void *workspace,
                                               size_t workspace_bytes) {
  return guarded([&] {
    if (!kernel || !kernel->kernel || !a)
      return fail(LINA_INVALID_ARGUMENT,
                  "lina_kernel_forward_with_workspace: kernel and args must "
                  "not be NULL");
    lina::Workspace lent{workspace, workspace_bytes,
                         "lina_kernel_workspace_size"};
    return fromStatus(kernel->kernel->forward(toForwardArgs(*a), lent));
  });
}

lina_status lina_check_forward_args(const char *spec_text,
                                    const lina_schedule *schedule,
                                    const lina_forward_args *a) {
  return guarded([&] {
    if (!spec_text || !a)
      return fail(LINA_INVALID_ARGUMENT,
                  "lina_check_forward_args: spec_text and args must not be "
                  "NULL");
    lina::Spec spec;
    std::string error;
    if (!lina::parseSpecText(spec_text, "spec", spec, error))
      return fail(LINA_INVALID_ARGUMENT, error);
    // The checks need only the schedule's numbers, not the kernel itself.
    lina::ScheduleOptions options =
        scheduleFor(spec, schedule).value_or(lina::defaultSchedule(spec));
    // The kernel's spec is the one lina-specialize makes (as a kernel
    // built from spec_text has); the inputs the text names may be passed.
    lina::KernelPlan plan;
    plan.spec = lina::specializedSpec(spec);
    plan.written = spec;
    plan.strategy = options.strategy;
    plan.chunkSize = options.chunkSize;
    plan.tileV = options.tileV;
    return fromStatus(lina::checkForwardArgs(plan, toForwardArgs(*a)));
  });
}

void lina_kernel_destroy(lina_kernel *kernel) { delete kernel; }

} // extern "C"
