//===- DecodeRun.cpp - One decode case on the GPU -----------------------===//
//
// Part of lina. Inputs are drawn, rounded to what the device reads (so the
// float64 reference sees the same numbers) and uploaded; the output is
// poisoned with NaN and every written buffer sits between guard bands; the
// pool keeps its state between the calls of a case, as in serving. Results
// are compared by ||out - ref|| / ||ref|| with the chunk suite's tolerances.
//
//===----------------------------------------------------------------------===//
#include "DecodeBuffers.h"
#include "DecodeSuite.h"

#include "lina/Codegen/DecodePlanner.h"
#include "lina/Codegen/KernelPlanner.h"
#include "lina/Reference/DecodeReference.h"
#include "lina/Reference/DeviceCheck.h"
#include "lina/Reference/Reference.h"
#include "lina/Runtime/Device.h"
#include "lina/Runtime/Memory.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <random>

namespace lina::decodesuite {
namespace {

using reference::DecodeProblem;
using reference::DecodeResult;
using reference::HostInputs;

std::vector<float> toFloats(const std::vector<double> &x) {
  return std::vector<float>(x.begin(), x.end());
}

/// Kernels by spec and schedule: most cases share theirs.
Expected<std::shared_ptr<DecodeKernel>>
decodeKernel(const Spec &spec, const DecodeSchedule &s, int device) {
  static std::map<std::string, std::shared_ptr<DecodeKernel>> cache;
  Expected<DecodePlan> plan = planDecodeKernel(spec, s);
  if (!plan.ok())
    return Status::error(plan.status().code(),
                         "planDecodeKernel: " + plan.message());
  // Warps per CTA is a launch choice, not in the source.
  std::string key = plan->source + "|" + std::to_string(s.warps);
  auto found = cache.find(key);
  if (found != cache.end())
    return found->second;
  Expected<DecodeKernel> kernel = DecodeKernel::load(*plan, device);
  if (!kernel.ok())
    return Status::error(kernel.status().code(),
                         "DecodeKernel::load: " + kernel.message());
  auto shared = std::make_shared<DecodeKernel>(std::move(*kernel));
  cache.emplace(key, shared);
  return shared;
}

/// Random slots for a pool or per-token case: distinct, in a pool with
/// spare slots, and one "no slot" (-1) when there is more than one entry.
void drawSlots(const DecodeCase &c, std::mt19937_64 &rng, DecodeProblem &dp) {
  const int64_t entries = c.batch * (c.kind == Kind::Spec ? c.seqLen : 1);
  dp.numSlots = entries + 3;
  std::vector<int32_t> all(dp.numSlots);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  dp.slots.assign(all.begin(), all.begin() + entries);
  if (entries > 1)
    dp.slots[1] = -1;
  if (c.kind == Kind::Spec) {
    dp.perToken = true;
    std::uniform_int_distribution<int32_t> accepted(1, int32_t(c.seqLen));
    for (int64_t b = 0; b < c.batch; ++b)
      dp.numAccepted.push_back(accepted(rng));
  }
}

void compare(Outcome &out, const std::vector<double> &o,
             const std::vector<double> &expectedO,
             const std::vector<double> &state,
             const std::vector<double> &expectedState, DType dtype) {
  out.compared = true;
  out.outputError = reference::relativeError(o, expectedO);
  out.stateError = reference::relativeError(state, expectedState);
  double limit = reference::tolerance(dtype);
  out.passed =
      out.outputError <= limit && out.stateError <= limit && out.keptSlots;
}

/// Pool, Spec and Fla cases: one call.
Status runOneCall(const DecodeCase &c, const DecodeKernel &kernel, int device,
                  std::mt19937_64 &rng, Outcome &out) {
  const Spec spec = caseSpec(c);
  const int64_t slotSize = spec.valueHeads * spec.keyDim * spec.valueDim;
  DecodeProblem dp;
  dp.step = reference::randomProblem(spec, c.batch, c.seqLen, rng);
  HostInputs in = reference::encodeProblem(dp.step);
  std::normal_distribution<double> normal;
  if (c.kind == Kind::Fla) {
    dp.numSlots = c.batch;
    for (int32_t b = 0; b < c.batch; ++b)
      dp.slots.push_back(b);
  } else {
    drawSlots(c, rng, dp);
  }
  dp.pool.assign(dp.numSlots * slotSize, 0.0);
  if (c.kind != Kind::Fla || c.initialState)
    for (double &x : dp.pool)
      x = float(normal(rng));
  DecodeResult expected = reference::runDecodeReference(dp);

  DecodeArgs args;
  StepBuffers buffers;
  LINA_RETURN_IF_ERROR(buffers.uploadStep(device, in, args));
  const size_t outputs =
      size_t(c.batch * c.seqLen * spec.valueHeads) * size_t(spec.valueDim);
  Expected<Guarded> o =
      Guarded::poisoned(device, outputs, reference::nanPattern(spec.dtype));
  if (!o.ok())
    return o.status();
  args.o = o->pointer();
  args.batch = c.batch;
  args.seqLen = c.seqLen;
  std::vector<float> pool = toFloats(dp.pool);
  Expected<Guarded> state =
      c.kind == Kind::Fla
          ? Guarded::poisoned(device, pool.size(),
                              reference::nanPattern(DType::F32))
          : Guarded::create(device, pool.data(), pool.size() * 4);
  if (!state.ok())
    return state.status();
  std::optional<Guarded> initial;
  const void *slots = nullptr, *accepted = nullptr;
  if (c.kind == Kind::Fla) {
    if (c.initialState) {
      Expected<Guarded> g =
          Guarded::create(device, pool.data(), pool.size() * 4);
      if (!g.ok())
        return g.status();
      initial.emplace(std::move(*g));
      args.initialState = static_cast<const float *>(initial->pointer());
    }
    args.finalState = static_cast<float *>(state->pointer());
  } else {
    LINA_RETURN_IF_ERROR(buffers.upload(device, dp.slots, slots));
    LINA_RETURN_IF_ERROR(buffers.upload(device, dp.numAccepted, accepted));
    args.state = static_cast<float *>(state->pointer());
    args.stateIndices = static_cast<const int32_t *>(slots);
    args.numAcceptedTokens = static_cast<const int32_t *>(accepted);
    args.numSlots = dp.numSlots;
    args.indicesPerToken = dp.perToken;
  }
  LINA_RETURN_IF_ERROR(kernel.forward(args));
  LINA_RETURN_IF_ERROR(cuda::synchronizeDevice(device));

  std::vector<uint8_t> bytes;
  LINA_RETURN_IF_ERROR(o->download(bytes, "o"));
  std::vector<double> oValues =
      reference::decode(bytes.data(), outputs, spec.dtype);
  LINA_RETURN_IF_ERROR(state->download(
      bytes, c.kind == Kind::Fla ? "final_state" : "state pool"));
  std::vector<double> after =
      reference::decode(bytes.data(), pool.size(), DType::F32);
  if (initial) {
    std::vector<uint8_t> unchanged;
    LINA_RETURN_IF_ERROR(initial->download(unchanged, "initial_state"));
    if (std::memcmp(unchanged.data(), pool.data(), unchanged.size()) != 0)
      out.keptSlots = false, out.message = "initial_state was written";
  }
  if (c.kind != Kind::Fla) {
    int64_t changed = reference::firstChangedUnwrittenElement(dp, after);
    if (changed >= 0) {
      out.keptSlots = false;
      out.message = "slot " + std::to_string(changed / slotSize) +
                    ", which the call must not write, changed (element " +
                    std::to_string(changed) + ")";
    }
  }
  compare(out, oValues, expected.o, after, expected.pool, spec.dtype);
  return Status();
}

/// Prefill P tokens with the chunk kernel, put its final states in two pool
/// slots, then decode the next tokens call by call (T = 1, 1, 3, 1) with
/// the pool staying on the device; everything must equal the float64
/// recurrence over the whole sequence.
Status runPrefill(const DecodeCase &c, const DecodeKernel &kernel, int device,
                  std::mt19937_64 &rng, Outcome &out) {
  const int64_t P = 100;
  const std::vector<int64_t> calls = {1, 1, 3, 1};
  int64_t total = P;
  for (int64_t n : calls)
    total += n;
  Spec spec = caseSpec(c);
  reference::Problem full = reference::randomProblem(spec, c.batch, total, rng);
  reference::encodeProblem(full); // rounds every token as the device sees it
  reference::Result expected = reference::runRecurrent(full);

  Spec chunkSpec = spec;
  chunkSpec.finalState = true;
  ScheduleOptions schedule = defaultSchedule(chunkSpec);
  Expected<KernelPlan> plan = planChunkKernel(chunkSpec, schedule);
  if (!plan.ok())
    return fail("planChunkKernel: " + plan.message());
  Expected<ChunkKernel> chunk = ChunkKernel::load(*plan, device);
  if (!chunk.ok())
    return fail("ChunkKernel::load: " + chunk.message());
  reference::Problem prefill = reference::sliceTokens(full, 0, P);
  prefill.spec.finalState = true;
  HostInputs prefillInputs = reference::encodeProblem(prefill);
  Expected<reference::DeviceRun> prefilled =
      reference::runOnDevice(*chunk, prefill, prefillInputs, device);
  if (!prefilled.ok())
    return prefilled.status();

  // Sequence b lives in slot slots[b] of a pool with one slot more.
  const int64_t slotSize = spec.valueHeads * spec.keyDim * spec.valueDim;
  const int64_t numSlots = c.batch + 1;
  std::vector<int32_t> slots(c.batch);
  std::vector<float> pool(numSlots * slotSize, 0.0f);
  for (int64_t b = 0; b < c.batch; ++b) {
    slots[b] = int32_t(c.batch - 1 - b) + 1; // reversed, slot 0 unused
    for (int64_t i = 0; i < slotSize; ++i)
      pool[slots[b] * slotSize + i] =
          float(prefilled->finalState[b * slotSize + i]);
  }
  Expected<Guarded> state =
      Guarded::create(device, pool.data(), pool.size() * 4);
  if (!state.ok())
    return state.status();
  StepBuffers fixed;
  const void *slotPointer = nullptr;
  LINA_RETURN_IF_ERROR(fixed.upload(device, slots, slotPointer));

  std::vector<std::vector<double>> outputs = {prefilled->o};
  std::vector<int64_t> lengths = {P};
  int64_t t0 = P;
  for (int64_t n : calls) {
    reference::Problem step = reference::sliceTokens(full, t0, n);
    HostInputs in = reference::encodeProblem(step);
    DecodeArgs args;
    StepBuffers buffers;
    LINA_RETURN_IF_ERROR(buffers.uploadStep(device, in, args));
    const size_t count =
        size_t(c.batch * n * spec.valueHeads) * size_t(spec.valueDim);
    Expected<Guarded> o =
        Guarded::poisoned(device, count, reference::nanPattern(spec.dtype));
    if (!o.ok())
      return o.status();
    args.o = o->pointer();
    args.state = static_cast<float *>(state->pointer());
    args.stateIndices = static_cast<const int32_t *>(slotPointer);
    args.numSlots = numSlots;
    args.batch = c.batch;
    args.seqLen = n;
    LINA_RETURN_IF_ERROR(kernel.forward(args));
    LINA_RETURN_IF_ERROR(cuda::synchronizeDevice(device));
    std::vector<uint8_t> bytes;
    LINA_RETURN_IF_ERROR(o->download(bytes, "o"));
    outputs.push_back(reference::decode(bytes.data(), count, spec.dtype));
    lengths.push_back(n);
    t0 += n;
  }
  // Reassemble [B, total, HV, V] from the calls' [B, n, HV, V].
  const int64_t row = spec.valueHeads * spec.valueDim;
  std::vector<double> o;
  for (int64_t b = 0; b < c.batch; ++b)
    for (size_t call = 0; call < outputs.size(); ++call)
      o.insert(o.end(), outputs[call].begin() + b * lengths[call] * row,
               outputs[call].begin() + (b + 1) * lengths[call] * row);
  std::vector<uint8_t> bytes;
  LINA_RETURN_IF_ERROR(state->download(bytes, "state pool"));
  std::vector<double> after =
      reference::decode(bytes.data(), pool.size(), DType::F32);
  std::vector<double> finals;
  for (int64_t b = 0; b < c.batch; ++b)
    finals.insert(finals.end(), after.begin() + slots[b] * slotSize,
                  after.begin() + (slots[b] + 1) * slotSize);
  for (int64_t i = 0; i < slotSize; ++i)
    if (after[i] != 0.0) {
      out.keptSlots = false;
      out.message = "the unused slot 0 was written";
      break;
    }
  compare(out, o, expected.o, finals, expected.finalState, spec.dtype);
  return Status();
}

} // namespace

Outcome runCase(const DecodeCase &c, int device, uint64_t seed) {
  Outcome out;
  std::mt19937_64 rng(seed);
  Expected<std::shared_ptr<DecodeKernel>> kernel =
      decodeKernel(caseSpec(c), c.schedule, device);
  if (!kernel.ok()) {
    out.message = kernel.message();
    return out;
  }
  out.warpColumns = (*kernel)->warpColumnsFor(c.batch);
  Status status =
      c.kind == Kind::Prefill   ? runPrefill(c, **kernel, device, rng, out)
      : c.kind == Kind::Serving ? runServing(c, **kernel, device, rng, out)
                                : runOneCall(c, **kernel, device, rng, out);
  if (!status.ok()) {
    out.passed = false;
    out.message = status.message();
  }
  return out;
}

} // namespace lina::decodesuite
