//===- BackwardCApi.cpp - The backward half of the C API ---------------===//
//
// Part of lina. Like CApi.cpp: everything is caught, and backward kernels
// are cached per (spec, schedule, device), so that a framework binding may
// ask for its kernel on every training step for the price of a lookup. The
// backward's schedule has three knobs (chunk size, value tile, warps); the
// forward's other knobs are refused rather than ignored, so that a caller
// passing its forward schedule learns that it does not apply.
//
//===----------------------------------------------------------------------===//
#include "lina/lina_c.h"

#include "CApiSupport.h"

#include "lina/Autotune/BackwardLoader.h"
#include "lina/Codegen/KernelPlanner.h"
#include "lina/Dialect/Lina/IR/SpecConversion.h"
#include "lina/Runtime/BackwardKernel.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>

struct lina_backward_kernel {
  std::shared_ptr<lina::BackwardKernel> kernel;
};

using namespace lina::capi;

namespace {

std::mutex cacheMutex;
std::map<std::string, std::shared_ptr<lina::BackwardKernel>> &backwardCache() {
  static auto *cache =
      new std::map<std::string, std::shared_ptr<lina::BackwardKernel>>();
  return *cache;
}

/// The backward's knobs of `s` (NULL: all default). LINA_OK, or
/// LINA_INVALID_ARGUMENT naming the knob to clear.
lina_status backwardSchedule(const lina_schedule *s,
                             lina::BackwardScheduleOptions &out) {
  if (!s)
    return LINA_OK;
  const char *forwardOnly = s->strategy != LINA_STRATEGY_DEFAULT   ? "strategy"
                            : s->prefetch != LINA_PREFETCH_DEFAULT ? "prefetch"
                            : s->segments != 0                     ? "segments"
                            : s->mma != LINA_MMA_DEFAULT           ? "mma"
                                                                   : nullptr;
  if (forwardOnly)
    return fail(LINA_INVALID_ARGUMENT,
                std::string("lina_backward_create: the backward's schedule "
                            "has only chunk_size, tile_v and warps; '") +
                    forwardOnly +
                    "' is a forward knob: set strategy, prefetch, segments "
                    "and mma to 0 (their defaults)");
  if (s->chunk_size < 0 || s->tile_v < 0 || s->warps < 0)
    return fail(LINA_INVALID_ARGUMENT,
                "lina_backward_create: chunk_size, tile_v and warps must not "
                "be negative (0 is the default), got " +
                    std::to_string(s->chunk_size) + ", " +
                    std::to_string(s->tile_v) + ", " +
                    std::to_string(s->warps));
  out.chunkSize = s->chunk_size;
  out.tileV = s->tile_v;
  out.warps = s->warps;
  return LINA_OK;
}

lina::BackwardArgs toBackwardArgs(const lina_backward_args &a) {
  lina::BackwardArgs args;
  args.forward = toForwardArgs(a.forward);
  args.dO = a.d_o;
  args.dFinalState = a.d_final_state;
  args.dq = a.dq;
  args.dk = a.dk;
  args.dv = a.dv;
  args.dg = a.dg;
  args.dBeta = a.dbeta;
  args.da = a.da;
  args.db = a.db;
  args.dGateALog = a.d_gate_a_log;
  args.dGateDtBias = a.d_gate_dt_bias;
  args.dInitialState = a.d_initial_state;
  return args;
}

} // namespace

extern "C" {

lina_status lina_backward_create(const char *spec_text,
                                 const lina_schedule *schedule, int device,
                                 lina_backward_kernel **out) {
  return guarded([&] {
    if (!spec_text || !out)
      return fail(LINA_INVALID_ARGUMENT,
                  "lina_backward_create: spec_text and out must not be NULL");
    *out = nullptr;
    lina::Spec spec;
    std::string error;
    if (!lina::parseSpecText(spec_text, "spec", spec, error))
      return fail(LINA_INVALID_ARGUMENT, error);
    lina::BackwardScheduleOptions options;
    if (lina_status s = backwardSchedule(schedule, options); s != LINA_OK)
      return s;
    std::string key =
        lina::printSpecModule(spec) + "|" + std::to_string(options.chunkSize) +
        "|" + std::to_string(options.tileV) + "|" +
        std::to_string(options.warps) + "|" + std::to_string(device);
    std::lock_guard<std::mutex> lock(cacheMutex);
    auto found = backwardCache().find(key);
    if (found == backwardCache().end()) {
      // Planned first: a schedule the planner refuses is named whether or
      // not this machine has a GPU.
      lina::Expected<lina::BackwardPlan> plan =
          lina::planBackwardKernel(spec, options);
      if (!plan.ok())
        return fromStatus(plan.status());
      // Through the cubin cache: a process that ran once before loads the
      // backward without NVRTC.
      lina::Expected<lina::BackwardKernel> kernel =
          lina::loadBackwardKernel(*plan, device);
      if (!kernel.ok())
        return fromStatus(kernel.status());
      found = backwardCache()
                  .emplace(key, std::make_shared<lina::BackwardKernel>(
                                    std::move(*kernel)))
                  .first;
    }
    *out = new lina_backward_kernel{found->second};
    lastError.clear();
    return LINA_OK;
  });
}

lina_status lina_backward_run(const lina_backward_kernel *kernel,
                              const lina_backward_args *args) {
  return guarded([&] {
    if (!kernel || !kernel->kernel || !args)
      return fail(LINA_INVALID_ARGUMENT,
                  "lina_backward_run: kernel and args must not be NULL");
    return fromStatus(kernel->kernel->backward(toBackwardArgs(*args)));
  });
}

lina_status lina_backward_workspace_size(const lina_backward_kernel *kernel,
                                         int64_t batch, int64_t seq_len,
                                         int64_t num_sequences,
                                         size_t *bytes) {
  return workspaceSize("lina_backward_workspace_size", kernel, batch, seq_len,
                       num_sequences, bytes);
}

lina_status lina_backward_run_with_workspace(
    const lina_backward_kernel *kernel, const lina_backward_args *args,
    void *workspace, size_t workspace_bytes) {
  return guarded([&] {
    if (!kernel || !kernel->kernel || !args)
      return fail(LINA_INVALID_ARGUMENT,
                  "lina_backward_run_with_workspace: kernel and args must not "
                  "be NULL");
    lina::Workspace lent{workspace, workspace_bytes,
                         "lina_backward_workspace_size"};
    return fromStatus(kernel->kernel->backward(toBackwardArgs(*args), lent));
  });
}

lina_status lina_backward_schedule(const lina_backward_kernel *kernel,
                                   lina_schedule *out) {
  return guarded([&] {
    if (!kernel || !kernel->kernel || !out)
      return fail(LINA_INVALID_ARGUMENT,
                  "lina_backward_schedule: kernel and out must not be NULL");
    const lina::BackwardPlan &plan = kernel->kernel->plan();
    *out = lina_schedule{};
    out->chunk_size = plan.chunkSize;
    out->tile_v = plan.tileV;
    out->warps = plan.threads / 32;
    lastError.clear();
    return LINA_OK;
  });
}

void lina_backward_destroy(lina_backward_kernel *kernel) { delete kernel; }

} // extern "C"
