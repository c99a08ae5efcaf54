//===- DecodeKernel.cpp - Launching generated decode kernels -----------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Runtime/DecodeKernel.h"
#include "lina/Runtime/Device.h"
#include "lina/Runtime/Nvrtc.h"

#include <algorithm>
#include <climits>
#include <cstdint>

namespace lina {

namespace {

/// Same layout as lina_decode::DecodeParams in Decode.cuh.
struct DecodeLaunchParams {
  const void *q, *k, *v;
  const float *g, *beta;
  const void *a, *b;
  const float *gateALog, *gateDtBias;
  void *o;
  const float *stateIn;
  float *stateOut;
  const int32_t *slots;
  const int32_t *numAccepted;
  const void *cuSeqlens;
  float *intermediate;
  const int32_t *intermediateRows;
  long long batch, seqLen, numSlots, slotsPerToken;
  long long cuSeqlensInt64;
  long long numIntermediate, intermediateSteps;
  long long disableStateUpdate;
};
// 17 pointers and 8 integers, 8 bytes each, no padding: as the device sees it.
static_assert(sizeof(DecodeLaunchParams) == 25 * 8,
              "DecodeLaunchParams must match DecodeParams in Decode.cuh");

Status invalid(const std::string &message) {
  return Status::error(StatusCode::InvalidArgument, message);
}

/// "" or why a pointer is wrong: required and missing, given but unused,
/// or not aligned to `align` bytes.
std::string pointerProblem(const void *p, const char *name, bool used,
                           size_t align, const char *why) {
  if (used && !p)
    return std::string("'") + name + "' is required: " + why;
  if (!used && p)
    return std::string("'") + name +
           "' was given but the spec does not use it: " + why;
  if (p && reinterpret_cast<uintptr_t>(p) % align != 0)
    return std::string("'") + name + "' is not aligned to " +
           std::to_string(align) + " bytes (" + why + ")";
  return "";
}

int64_t valueTiles(const Spec &spec, int64_t warpColumns, int64_t warps) {
  int64_t columns = warpColumns * warps;
  return (spec.valueDim + columns - 1) / columns;
}

/// The serving engines' additions: packed tokens, intermediate states and
/// disable_state_update (docs/decode.md). Runs after the state form's
/// checks.
std::string checkDecodeLayout(const DecodeArgs &args) {
  if (args.cuSeqlens) {
    size_t align = args.cuSeqlensInt64 ? 8 : 4;
    if (reinterpret_cast<uintptr_t>(args.cuSeqlens) % align != 0)
      return "'cuSeqlens' is not aligned to " + std::to_string(align) +
             " bytes (" + (args.cuSeqlensInt64 ? "int64" : "int32") +
             " [batch + 1])";
  } else if (args.cuSeqlensInt64) {
    return "'cuSeqlensInt64' was given without 'cuSeqlens'";
  }
  if (args.intermediateStates) {
    std::string problem =
        pointerProblem(args.intermediateStates, "intermediateStates", true, 16,
                       "fp32 [numIntermediate, intermediateSteps, HV, K, V]");
    if (!problem.empty())
      return problem;
    if (args.numIntermediate < 1 || args.numIntermediate > INT32_MAX)
      return "numIntermediate must be 1 to 2^31 - 1 (intermediateStates' "
             "first dimension), got " +
             std::to_string(args.numIntermediate);
    if (args.intermediateSteps < 1 || args.intermediateSteps > INT32_MAX)
      return "intermediateSteps must be 1 to 2^31 - 1 (intermediateStates' "
             "second dimension), got " +
             std::to_string(args.intermediateSteps);
    if (!args.cuSeqlens && args.intermediateSteps < args.seqLen)
      return "intermediateStates keeps " +
             std::to_string(args.intermediateSteps) +
             " states per sequence but the call has seqLen " +
             std::to_string(args.seqLen) +
             " tokens: give a buffer with at least seqLen steps";
    if (args.intermediateIndices &&
        reinterpret_cast<uintptr_t>(args.intermediateIndices) % 4 != 0)
      return "'intermediateIndices' is not aligned to 4 bytes (int32 [B])";
  } else if (args.intermediateIndices || args.numIntermediate ||
             args.intermediateSteps) {
    return "'intermediateIndices', 'numIntermediate' and 'intermediateSteps' "
           "describe 'intermediateStates': give the buffer too";
  }
  if (args.disableStateUpdate && (!args.state || args.indicesPerToken))
    return "'disableStateUpdate' keeps the pool's slots as they were: it "
           "needs the state pool with a slot per sequence (stateIndices [B]); "
           "with fla's form pass no finalState instead";
  return "";
}

} // namespace

std::vector<int64_t> decodeWarpColumnChoices(const Spec &spec) {
  std::vector<int64_t> choices;
  for (int64_t width : {4, 8, 16})
    if (spec.valueDim % width == 0 && spec.keyDim * width <= 2048)
      choices.push_back(width);
  return choices;
}

std::vector<DecodeSchedule> decodeScheduleSpace(const Spec &spec) {
  std::vector<DecodeSchedule> space;
  for (int64_t width : decodeWarpColumnChoices(spec))
    for (int64_t warps : {1, 2, 4, 8})
      space.push_back({width, warps});
  return space;
}

DecodeSchedule defaultDecodeSchedule(const Spec &spec, int64_t batch,
                                     const std::vector<int64_t> &available) {
  // Wide warps at every batch: fewer repeated q/k loads and shuffles per
  // state byte. Few (sequence, head) pairs are latency-bound too, but
  // spreading a head over more, narrower warps did not pay: the earlier
  // default, 4 and 8 columns on four warps at batch 1 and 32, took
  // 1.06-1.31x the time of 16 columns on two (gdn and kda, 32 heads, d128;
  // docs/benchmarks.md). dplr keeps a and b rows as well: at 16 columns its
  // lanes need ~230 registers (K = 128), which halves the warps an SM can
  // hold.
  const int64_t want = spec.update == UpdateRule::DPLR ? 8 : 16;
  DecodeSchedule chosen{available.empty() ? 0 : available.front(), 0};
  for (int64_t width : available)
    if (width <= want)
      chosen.warpColumns = width;
  // Small CTAs while they are few (more SMs busy); four warps once there
  // are many (fewer CTAs to schedule).
  chosen.warps = batch * spec.valueHeads <= 2048 ? 2 : 4;
  return chosen;
}

std::string checkDecodeArgs(const DecodePlan &plan, const DecodeArgs &args) {
  const Spec &s = plan.spec;
  const size_t el = s.dtype == DType::F32 ? 4 : 2;
  const bool dplr = s.update == UpdateRule::DPLR;
  const bool computedGate = s.gate != GateSource::Given;
  std::string problem;
  auto check = [&](const void *p, const char *name, bool used, size_t align,
                   const char *why) {
    if (problem.empty())
      problem = pointerProblem(p, name, used, align, why);
  };
  check(args.q, "q", true, el, "[B, T, H, K]");
  check(args.k, "k", true, el, "[B, T, H, K]");
  // v and o move 4 columns at a time.
  check(args.v, "v", true, 4 * el, "[B, T, HV, V]");
  check(args.o, "o", true, 4 * el, "[B, T, HV, V]");
  check(args.g, "g", s.hasGate(), 4, "fp32 log gates (decay is not none)");
  check(args.beta, "beta", s.beta != BetaSource::None, 4, "fp32 [B, T, HV]");
  check(args.a, "a", dplr && s.lowRankA == LowRankSource::Input, el,
        "[B, T, HV, K] (dplr with low_rank_a = input)");
  check(args.b, "b", dplr && s.lowRankB == LowRankSource::Input, el,
        "[B, T, HV, K] (dplr with low_rank_b = input)");
  check(args.gateALog, "gateALog", computedGate, 4,
        "fp32 [HV] (gate computed in the kernel)");
  if (problem.empty() && args.gateDtBias && !computedGate)
    problem = "'gateDtBias' was given but the gate is not computed in the "
              "kernel";
  if (!problem.empty())
    return problem;

  if (args.batch < 1)
    return "batch must be at least 1, got " + std::to_string(args.batch);
  if (args.seqLen < 1 || args.seqLen > kMaxDecodeTokens)
    return "decode takes 1 to " + std::to_string(kMaxDecodeTokens) +
           " tokens per sequence, got seqLen " + std::to_string(args.seqLen) +
           ": run longer prompts through the chunk kernel (prefill) first";

  if (args.state) {
    if (args.initialState || args.finalState)
      return "give the state pool ('state' with 'stateIndices') or "
             "'initialState'/'finalState', not both";
    check(args.state, "state", true, 16, "fp32 [numSlots, HV, K, V]");
    check(args.stateIndices, "stateIndices", true, 4,
          args.indicesPerToken ? "int32 [B, T], a slot per token"
                               : "int32 [B], a slot per sequence");
    if (!problem.empty())
      return problem;
    if (args.numSlots < 1 || args.numSlots > INT32_MAX)
      return "numSlots must be 1 to 2^31 - 1 (the pool's first dimension), "
             "got " +
             std::to_string(args.numSlots);
    if (args.numAcceptedTokens && !args.indicesPerToken)
      return "'numAcceptedTokens' needs per-token state indices "
             "(indicesPerToken, stateIndices [B, T]): it picks which of the "
             "previous call's token states to start from";
    // Optional with per-token indices: absent means one accepted token.
    check(args.numAcceptedTokens, "numAcceptedTokens",
          args.numAcceptedTokens != nullptr, 4, "int32 [B]");
  } else {
    if (args.stateIndices || args.numAcceptedTokens || args.indicesPerToken)
      return "'stateIndices' and 'numAcceptedTokens' index the state pool: "
             "give 'state' [numSlots, HV, K, V] too";
    if (args.numSlots != 0)
      return "'numSlots' was given without the state pool 'state'";
    check(args.initialState, "initialState", args.initialState != nullptr, 16,
          "fp32 [B, HV, K, V]");
    check(args.finalState, "finalState", args.finalState != nullptr, 16,
          "fp32 [B, HV, K, V]");
  }
  if (!problem.empty())
    return problem;
  if (std::string layout = checkDecodeLayout(args); !layout.empty())
    return layout;

  int64_t widest = plan.warpColumns.empty() ? 4 : plan.warpColumns.front();
  for (int64_t w : plan.warpColumns)
    widest = std::min(widest, w);
  // An open warp count may be chosen per call (down to one warp), so the
  // bound is checked for the most CTAs any choice could launch.
  int64_t warps = plan.schedule.warps > 0 ? plan.schedule.warps : 1;
  int64_t ctas = args.batch * s.valueHeads * valueTiles(s, widest, warps);
  if (args.batch > INT32_MAX || ctas > INT32_MAX)
    return "too many (sequence, value head, value tile) blocks: " +
           std::to_string(args.batch) + " sequences x " +
           std::to_string(s.valueHeads) + " value heads; split the batch";
  return "";
}

cuda::CompileOptions decodeCompileOptions(const std::string &arch) {
  cuda::CompileOptions options;
  options.arch = arch;
  options.programName = "lina_decode.cu";
  return options;
}

Expected<std::string> compileDecodePlan(const DecodePlan &plan,
                                        const std::string &arch) {
  const cuda::Nvrtc &nvrtc = cuda::Nvrtc::get();
  if (!nvrtc.available())
    return nvrtc.status();
  Expected<cuda::CompiledKernel> compiled =
      nvrtc.compile(plan.source, decodeCompileOptions(arch));
  if (!compiled.ok())
    return compiled.status();
  return std::move(compiled->cubin);
}

Expected<DecodeKernel> DecodeKernel::load(const DecodePlan &plan, int ordinal) {
  Expected<cuda::Device> device = cuda::queryDevice(ordinal);
  if (!device.ok())
    return device.status();
  Expected<std::string> cubin = compileDecodePlan(plan, device->arch);
  if (!cubin.ok())
    return cubin.status();
  return fromCubin(plan, *cubin, ordinal);
}

Expected<DecodeKernel> DecodeKernel::fromCubin(const DecodePlan &plan,
                                               const std::string &cubin,
                                               int ordinal) {
  if (plan.warpColumns.empty() ||
      plan.warpColumns.size() != plan.kernelNames.size())
    return invalid("internal: a decode plan needs one kernel name per "
                   "warp-column width");
  Expected<cuda::Module> module = cuda::Module::load(ordinal, cubin);
  if (!module.ok())
    return module.status();
  DecodeKernel kernel;
  kernel.plan_ = plan;
  kernel.module_ = std::make_shared<cuda::Module>(std::move(*module));
  for (const std::string &name : plan.kernelNames) {
    Expected<cuda::Kernel> k = kernel.module_->kernel(name);
    if (!k.ok())
      return k.status();
    kernel.kernels_.push_back(*k);
    Expected<cuda::Kernel> twin =
        kernel.module_->kernel(name + kDecodeVFirstSuffix);
    if (!twin.ok())
      return twin.status();
    kernel.vFirstKernels_.push_back(*twin);
  }
  return kernel;
}

int64_t DecodeKernel::warpColumnsFor(int64_t batch) const {
  return scheduleFor(batch, 1).warpColumns;
}

DecodeSchedule DecodeKernel::scheduleFor(int64_t batch, int64_t tokens) const {
  DecodeSchedule s = plan_.schedule;
  if (s.warpColumns == 0 && s.warps == 0 && chooser_) {
    // A recorded result names a width; this plan may lack it (a cache from
    // another build): then the default stands.
    std::optional<DecodeSchedule> tuned = chooser_(batch, tokens);
    if (tuned && tuned->warps >= 1 && tuned->warps <= 8 &&
        std::find(plan_.warpColumns.begin(), plan_.warpColumns.end(),
                  tuned->warpColumns) != plan_.warpColumns.end())
      return *tuned;
  }
  DecodeSchedule fallback =
      defaultDecodeSchedule(plan_.spec, batch, plan_.warpColumns);
  if (s.warpColumns == 0)
    s.warpColumns = fallback.warpColumns;
  if (s.warps == 0)
    s.warps = fallback.warps;
  return s;
}

Status DecodeKernel::forward(const DecodeArgs &args) const {
  if (std::string problem = checkDecodeArgs(plan_, args); !problem.empty())
    return invalid(problem);
  const Spec &s = plan_.spec;
  DecodeSchedule schedule = scheduleFor(args.batch, args.seqLen);
  int64_t width = schedule.warpColumns;
  size_t index =
      std::find(plan_.warpColumns.begin(), plan_.warpColumns.end(), width) -
      plan_.warpColumns.begin();
  if (index >= kernels_.size())
    return invalid("internal: no decode kernel for " + std::to_string(width) +
                   " columns per warp");
  int64_t warps = schedule.warps;

  DecodeLaunchParams p{};
  p.q = args.q;
  p.k = args.k;
  p.v = args.v;
  p.g = args.g;
  p.beta = args.beta;
  p.a = args.a;
  p.b = args.b;
  p.gateALog = args.gateALog;
  p.gateDtBias = args.gateDtBias;
  p.o = args.o;
  p.batch = args.batch;
  p.seqLen = args.seqLen;
  if (args.state) {
    p.stateIn = args.state;
    p.stateOut = args.state;
    p.slots = args.stateIndices;
    p.numAccepted = args.numAcceptedTokens;
    p.numSlots = args.numSlots;
    p.slotsPerToken = args.indicesPerToken ? 1 : 0;
  } else {
    p.stateIn = args.initialState;
    p.stateOut = args.finalState;
    p.numSlots = args.batch;
  }
  p.cuSeqlens = args.cuSeqlens;
  p.cuSeqlensInt64 = args.cuSeqlensInt64 ? 1 : 0;
  p.intermediate = args.intermediateStates;
  p.intermediateRows = args.intermediateIndices;
  p.numIntermediate = args.numIntermediate;
  p.intermediateSteps = args.intermediateSteps;
  p.disableStateUpdate = args.disableStateUpdate ? 1 : 0;
  cuda::LaunchConfig config;
  config.grid.x = static_cast<unsigned>(args.batch * s.valueHeads *
                                        valueTiles(s, width, warps));
  config.block.x = static_cast<unsigned>(warps * 32);
  config.stream = args.stream;
  const std::vector<cuda::Kernel> &set =
      args.stateVFirst ? vFirstKernels_ : kernels_;
  return set[index].launchWith(config, p);
}

} // namespace lina
