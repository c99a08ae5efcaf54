//===- DecodeCApi.cpp - The decode half of the C API -------------------===//
//
// Part of lina. Like CApi.cpp: everything is caught, and kernels are cached
// per (spec, schedule, device), so a serving loop may ask for its kernel on
// every step for the price of a lookup; across processes the cubin cache
// (DecodeLoader.h) skips NVRTC.
//
//===----------------------------------------------------------------------===//
#include "lina/lina_c.h"

#include "CApiSupport.h"

#include "lina/Autotune/DecodeLoader.h"
#include "lina/Codegen/DecodePlanner.h"
#include "lina/Dialect/Lina/IR/SpecConversion.h"
#include "lina/Runtime/DecodeKernel.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>

struct lina_decode_kernel {
  std::shared_ptr<lina::DecodeKernel> kernel;
};

using namespace lina::capi;

namespace {

std::mutex cacheMutex;
std::map<std::string, std::shared_ptr<lina::DecodeKernel>> &decodeCache() {
  static auto *cache =
      new std::map<std::string, std::shared_ptr<lina::DecodeKernel>>();
  return *cache;
}

} // namespace

extern "C" {

lina_status lina_decode_create(const char *spec_text,
                               const lina_decode_schedule *schedule, int device,
                               lina_decode_kernel **out) {
  return guarded([&] {
    if (!spec_text || !out)
      return fail(LINA_INVALID_ARGUMENT,
                  "lina_decode_create: spec_text and out must not be NULL");
    *out = nullptr;
    lina::Spec spec;
    std::string error;
    if (!lina::parseSpecText(spec_text, "spec", spec, error))
      return fail(LINA_INVALID_ARGUMENT, error);
    lina::DecodeSchedule options;
    if (schedule) {
      options.warpColumns = schedule->warp_columns;
      options.warps = schedule->warps;
    }
    // The state flags do not change a decode kernel: leave them out of the
    // key so that specs differing only there share one.
    spec.initialState = spec.finalState = false;
    std::string key = lina::printSpecModule(spec) + "|" +
                      std::to_string(options.warpColumns) + "|" +
                      std::to_string(options.warps) + "|" +
                      std::to_string(device);
    std::lock_guard<std::mutex> lock(cacheMutex);
    auto found = decodeCache().find(key);
    if (found == decodeCache().end()) {
      lina::Expected<lina::DecodePlan> plan =
          lina::planDecodeKernel(spec, options);
      if (!plan.ok())
        return fromStatus(plan.status());
      lina::Expected<lina::DecodeKernel> kernel =
          lina::loadDecodeKernel(*plan, device);
      if (!kernel.ok())
        return fromStatus(kernel.status());
      found =
          decodeCache()
              .emplace(key,
                       std::make_shared<lina::DecodeKernel>(std::move(*kernel)))
              .first;
    }
    *out = new lina_decode_kernel{found->second};
    lastError.clear();
    return LINA_OK;
  });
}

lina_status lina_decode_forward(const lina_decode_kernel *kernel,
                                const lina_decode_args *a) {
  return guarded([&] {
    if (!kernel || !kernel->kernel || !a)
      return fail(LINA_INVALID_ARGUMENT,
                  "lina_decode_forward: kernel and args must not be NULL");
    lina::DecodeArgs args;
    args.q = a->q;
    args.k = a->k;
    args.v = a->v;
    args.g = a->g;
    args.beta = a->beta;
    args.a = a->a;
    args.b = a->b;
    args.gateALog = a->gate_a_log;
    args.gateDtBias = a->gate_dt_bias;
    args.o = a->o;
    args.state = a->state;
    args.stateIndices = a->state_indices;
    args.numAcceptedTokens = a->num_accepted_tokens;
    args.numSlots = a->num_slots;
    args.indicesPerToken = a->indices_per_token != 0;
    args.initialState = a->initial_state;
    args.finalState = a->final_state;
    args.batch = a->batch;
    args.seqLen = a->seq_len;
    args.stream = static_cast<lina::cuda::CUstream>(a->stream);
    args.cuSeqlens = a->cu_seqlens;
    args.cuSeqlensInt64 = a->cu_seqlens_int64 != 0;
    args.stateVFirst = a->state_v_first != 0;
    args.intermediateStates = a->intermediate_states;
    args.intermediateIndices = a->intermediate_indices;
    args.numIntermediate = a->num_intermediate;
    args.intermediateSteps = a->intermediate_steps;
    args.disableStateUpdate = a->disable_state_update != 0;
    return fromStatus(kernel->kernel->forward(args));
  });
}

int64_t lina_decode_warp_columns(const lina_decode_kernel *kernel,
                                 int64_t batch) {
  if (!kernel || !kernel->kernel)
    return 0;
  return kernel->kernel->warpColumnsFor(batch);
}

void lina_decode_destroy(lina_decode_kernel *kernel) { delete kernel; }

} // extern "C"
