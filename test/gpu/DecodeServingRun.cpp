//===- DecodeServingRun.cpp - A Serving case on the GPU -----------------===//
//
// Part of lina. One decode call in the serving engines' layouts against
// reference::runServingReference: packed sequences of different lengths
// (one empty), per-token rows with accepted counts, or [B, T] verification
// keeping every token's state in an intermediate buffer with the pool left
// alone; states in [K, V] or [V, K] order. Outputs are NaN-poisoned, the
// intermediate buffer starts as NaN too, every written buffer sits between
// guard bands, and slots and steps the call must not write are compared
// bit for bit.
//
//===----------------------------------------------------------------------===//
#include "DecodeBuffers.h"
#include "DecodeSuite.h"

#include "lina/Reference/DecodeServing.h"
#include "lina/Runtime/Device.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

namespace lina::decodesuite {
namespace {

/// The call a case makes (DecodeCases.cpp names its sizes).
reference::ServingCall servingCall(const DecodeCase &c) {
  reference::ServingCall call;
  call.spec = caseSpec(c);
  switch (c.serving) {
  case ServingForm::Packed:
    // Sequence 1 is an engine's padding (its slot 6 must not change), 3
    // has no slot; slots 2 and 7 are nobody's.
    call.lengths = {3, 0, 1, 16, 2};
    call.numSlots = 8;
    call.slots = {4, 6, 0, -1, 1};
    break;
  case ServingForm::PackedSpec:
    // vLLM's speculative step: a row of 4 slots per request, each token's
    // state in its own slot. Sequence 1 has 3 tokens and starts from its
    // row's 4th slot; sequence 2 is padding; sequence 3 keeps no state
    // after its 3rd token (-1); slot 0 is nobody's.
    call.lengths = {4, 3, 0, 4};
    call.perToken = true;
    call.rowWidth = 4;
    call.numSlots = 17;
    call.slots = {1, 2, 3, 4, 5, 6, 7, 15, 8, 9, 10, 11, 12, 13, -1, 16};
    call.accepted = {2, 4, 1, 3};
    break;
  case ServingForm::Verify:
    // FlashInfer's verification: the states after each of 4 draft tokens
    // in the rows of the sequences' slots; the pool is only read.
    call.lengths = {4, 4, 4};
    call.numSlots = 6;
    call.slots = {2, 0, 5};
    call.numIntermediate = 6;
    call.steps = 4;
    call.disableStateUpdate = true;
    break;
  }
  return call;
}

} // namespace

Status runServing(const DecodeCase &c, const DecodeKernel &kernel, int device,
                  std::mt19937_64 &rng, Outcome &out) {
  reference::ServingCall call = servingCall(c);
  reference::drawServingCall(call, rng);
  reference::HostInputs in = reference::encodeServingCall(call);
  reference::ServingResult expected = reference::runServingReference(call);
  const Spec &spec = call.spec;
  const int64_t K = spec.keyDim, V = spec.valueDim;
  const int64_t slotSize = spec.valueHeads * K * V;
  const int64_t tokens = in.cuSeqlens.back();
  const bool packed = c.serving != ServingForm::Verify;

  DecodeArgs args;
  StepBuffers buffers;
  LINA_RETURN_IF_ERROR(buffers.uploadStep(device, in, args));
  const size_t outputs = size_t(tokens * spec.valueHeads * V);
  Expected<Guarded> o =
      Guarded::poisoned(device, outputs, reference::nanPattern(spec.dtype));
  if (!o.ok())
    return o.status();
  args.o = o->pointer();
  auto layout = [&](const std::vector<double> &x) {
    std::vector<double> y =
        c.vFirst ? reference::transposeHeads(x, K, V, false) : x;
    return std::vector<float>(y.begin(), y.end());
  };
  std::vector<float> pool = layout(call.pool);
  Expected<Guarded> state =
      Guarded::create(device, pool.data(), pool.size() * 4);
  if (!state.ok())
    return state.status();
  const void *slots = nullptr, *accepted = nullptr, *offsets = nullptr;
  LINA_RETURN_IF_ERROR(buffers.upload(device, call.slots, slots));
  LINA_RETURN_IF_ERROR(buffers.upload(device, call.accepted, accepted));
  args.state = static_cast<float *>(state->pointer());
  args.stateIndices = static_cast<const int32_t *>(slots);
  args.numAcceptedTokens = static_cast<const int32_t *>(accepted);
  args.numSlots = call.numSlots;
  args.indicesPerToken = call.perToken;
  args.batch = int64_t(call.lengths.size());
  args.stateVFirst = c.vFirst;
  if (packed) {
    std::vector<int32_t> offsets32(in.cuSeqlens.begin(), in.cuSeqlens.end());
    if (c.int64Offsets)
      LINA_RETURN_IF_ERROR(buffers.upload(device, in.cuSeqlens, offsets));
    else
      LINA_RETURN_IF_ERROR(buffers.upload(device, offsets32, offsets));
    args.cuSeqlens = offsets;
    args.cuSeqlensInt64 = c.int64Offsets;
    args.seqLen = call.perToken ? call.rowWidth : c.seqLen;
  } else {
    args.seqLen = call.lengths.front(); // equal lengths: [B, T] as packed
  }
  std::optional<Guarded> intermediate;
  if (call.numIntermediate) {
    Expected<Guarded> g =
        Guarded::poisoned(device, expected.intermediate.size(),
                          reference::nanPattern(DType::F32));
    if (!g.ok())
      return g.status();
    intermediate.emplace(std::move(*g));
    args.intermediateStates = static_cast<float *>(intermediate->pointer());
    args.numIntermediate = call.numIntermediate;
    args.intermediateSteps = call.steps;
  }
  args.disableStateUpdate = call.disableStateUpdate;
  LINA_RETURN_IF_ERROR(kernel.forward(args));
  LINA_RETURN_IF_ERROR(cuda::synchronizeDevice(device));

  std::vector<uint8_t> bytes;
  LINA_RETURN_IF_ERROR(o->download(bytes, "o"));
  std::vector<double> oValues =
      reference::decode(bytes.data(), outputs, spec.dtype);
  auto standard = [&](const std::vector<uint8_t> &raw, size_t count) {
    std::vector<double> y = reference::decode(raw.data(), count, DType::F32);
    return c.vFirst ? reference::transposeHeads(y, K, V, true) : y;
  };
  LINA_RETURN_IF_ERROR(state->download(bytes, "state pool"));
  std::vector<double> after = standard(bytes, pool.size());
  for (size_t i = 0; i < after.size() && out.keptSlots; ++i)
    if (!expected.writtenSlots[i / slotSize] && after[i] != call.pool[i]) {
      out.keptSlots = false;
      out.message = "slot " + std::to_string(i / slotSize) +
                    ", which the call must not write, changed";
    }
  out.compared = true;
  out.outputError = reference::relativeError(oValues, expected.o);
  out.stateError = reference::relativeError(after, expected.pool);
  if (intermediate) {
    // The kept steps are states too: the worse of the two errors counts.
    LINA_RETURN_IF_ERROR(intermediate->download(bytes, "intermediate states"));
    std::vector<double> steps = standard(bytes, expected.intermediate.size());
    std::vector<double> got, want;
    for (size_t i = 0; i < steps.size(); ++i) {
      if (expected.writtenSteps[i / slotSize]) {
        got.push_back(steps[i]);
        want.push_back(expected.intermediate[i]);
      } else if (!std::isnan(steps[i]) && out.keptSlots) {
        out.keptSlots = false;
        out.message = "intermediate step " + std::to_string(i / slotSize) +
                      ", which the call must not write, changed";
      }
    }
    out.stateError =
        std::max(out.stateError, reference::relativeError(got, want));
  }
  double limit = reference::tolerance(spec.dtype);
  out.passed =
      out.outputError <= limit && out.stateError <= limit && out.keptSlots;
  return Status();
}

} // namespace lina::decodesuite
