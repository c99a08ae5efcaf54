//===- BackwardSchedules.cpp - lina_backward_create_for_shape ----------===//
//
// Part of lina. The shape only chooses the schedule: the kernel itself comes
// from lina_backward_create, with its checks and its cache of loaded
// kernels.
//
//===----------------------------------------------------------------------===//
#include "BackwardSchedules.h"
#include "CApiSupport.h"

#include "lina/Autotune/BackwardTuning.h"
#include "lina/Autotune/KernelLoader.h"
#include "lina/Dialect/Lina/IR/SpecConversion.h"
#include "lina/Runtime/Device.h"

#include <map>
#include <mutex>
#include <optional>
#include <string>

using namespace lina::capi;

namespace {

std::mutex choiceMutex;
/// (spec text, bucket, device) -> the tuned schedule, or nullopt: none.
std::map<std::string, std::optional<lina::BackwardScheduleOptions>> &
choices() {
  static auto *map =
      new std::map<std::string, std::optional<lina::BackwardScheduleOptions>>();
  return *map;
}

bool setsAnyKnob(const lina_schedule *s) {
  return s && (s->chunk_size != 0 || s->tile_v != 0 || s->warps != 0 ||
               s->strategy != LINA_STRATEGY_DEFAULT ||
               s->prefetch != LINA_PREFETCH_DEFAULT || s->segments != 0 ||
               s->mma != LINA_MMA_DEFAULT);
}

/// The tuned backward schedule of the call's bucket on `device`, or
/// nullopt (no cache, no GPU, or nothing tuned).
std::optional<lina::BackwardScheduleOptions>
tunedFor(const std::string &specText, const lina::Spec &spec, int64_t batch,
         int64_t seqLen, int device) {
  std::string key =
      specText + "|" +
      lina::cache::shapeBucket(batch, seqLen, spec.valueHeads).str() + "|" +
      std::to_string(device);
  std::lock_guard<std::mutex> lock(choiceMutex);
  auto found = choices().find(key);
  if (found != choices().end())
    return found->second;
  std::optional<lina::BackwardScheduleOptions> tuned;
  lina::cache::Cache *cache = lina::processCache();
  lina::Expected<lina::cuda::Device> gpu = lina::cuda::queryDevice(device);
  // Without a GPU lina_backward_create says so; nothing is remembered.
  if (!gpu.ok())
    return std::nullopt;
  if (cache)
    if (std::optional<lina::TunedBackward> t = lina::lookupTunedBackward(
            *cache, spec, lina::gpuIdentity(*gpu), lina::nvrtcVersionString(),
            batch, seqLen))
      tuned = t->schedule;
  choices().emplace(key, tuned);
  return tuned;
}

} // namespace

void lina::capi::forgetBackwardSchedules() {
  std::lock_guard<std::mutex> lock(choiceMutex);
  choices().clear();
}

extern "C" {

lina_status lina_backward_create_for_shape(const char *spec_text,
                                           const lina_schedule *schedule,
                                           int64_t batch, int64_t seq_len,
                                           int device,
                                           lina_backward_kernel **out) {
  return guarded([&] {
    if (!spec_text || !out)
      return fail(LINA_INVALID_ARGUMENT,
                  "lina_backward_create_for_shape: spec_text and out must "
                  "not be NULL");
    if (batch < 0 || seq_len < 0)
      return fail(LINA_INVALID_ARGUMENT,
                  "lina_backward_create_for_shape: batch and seq_len must "
                  "not be negative (0: the shape is not known), got " +
                      std::to_string(batch) + " and " +
                      std::to_string(seq_len));
    if (setsAnyKnob(schedule) || batch == 0 || seq_len == 0)
      return lina_backward_create(spec_text, schedule, device, out);
    lina::Spec spec;
    std::string error;
    if (!lina::parseSpecText(spec_text, "spec", spec, error))
      return fail(LINA_INVALID_ARGUMENT, error);
    std::optional<lina::BackwardScheduleOptions> tuned =
        tunedFor(spec_text, spec, batch, seq_len, device);
    if (!tuned)
      return lina_backward_create(spec_text, nullptr, device, out);
    lina_schedule chosen = {};
    chosen.chunk_size = tuned->chunkSize;
    chosen.tile_v = tuned->tileV;
    chosen.warps = tuned->warps;
    lina_status status = lina_backward_create(spec_text, &chosen, device, out);
    // A result the planner now refuses (recorded by a lina whose backward
    // kernels differed) costs speed, never the call: the default instead.
    if (status == LINA_INVALID_ARGUMENT)
      return lina_backward_create(spec_text, nullptr, device, out);
    return status;
  });
}

} // extern "C"
