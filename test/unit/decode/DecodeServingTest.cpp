//===- DecodeServingTest.cpp - Serving engines' layouts, emulated -------===//
//
// Part of lina. The decode kernel's code (Decode.cuh on the CPU, as in
// DecodeEmulationTest) on the layouts serving engines call it with: packed
// tokens with int32 or int64 cu_seqlens, sequences of different lengths
// (an empty one among them), the pool in [V, K] order, the states after
// every token in an intermediate buffer, and disable_state_update. The
// expected values are reference::runServingReference: a packed call must
// equal each sequence's own [1, T] call.
//
//===----------------------------------------------------------------------===//
#include "DecodePresetCodes.h"

#include "lina/Reference/DecodeServing.h"
#include "lina/Reference/DeviceCheck.h"
#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>

// Last: the emulated device defines the CUDA keywords as macros.
#include "DecodeEmulation.h"

using namespace lina;
using namespace lina::decodetest;

namespace {

constexpr float kSentinel = -1234.5f; // a buffer value nothing may write

/// One call in the engines' layouts: the reference's fields, and how the
/// kernel gets them.
struct Served {
  reference::ServingCall call;
  bool int64Offsets = false;
  bool vFirst = false;

  Served() {
    call.lengths = {2, 0, 3, 1};
    call.numSlots = 9;
    call.slots = {4, 7, 0, -1};
  }
};

struct Outcome {
  double outputError = std::numeric_limits<double>::infinity();
  double stateError = std::numeric_limits<double>::infinity();
  double intermediateError = 0.0;
};

template <typename T> const T *orNull(const std::vector<T> &v) {
  return v.empty() ? nullptr : v.data();
}

template <class C, int VW>
Outcome run(const Spec &spec, const Served &served, int warps, uint64_t seed) {
  std::mt19937_64 rng(seed);
  reference::ServingCall call = served.call;
  call.spec = spec;
  reference::drawServingCall(call, rng);
  reference::HostInputs packed = reference::encodeServingCall(call);
  reference::ServingResult expected = reference::runServingReference(call);
  const int64_t K = spec.keyDim, V = spec.valueDim;
  const int64_t slotSize = spec.valueHeads * K * V;
  const int64_t tokens = packed.cuSeqlens.back();
  const size_t outputs = size_t(tokens * spec.valueHeads * V);
  for (size_t i = 0; i < expected.writtenSteps.size(); ++i)
    if (!expected.writtenSteps[i])
      std::fill_n(expected.intermediate.begin() + i * slotSize, slotSize,
                  double(kSentinel));

  // The kernel's buffers: fp32 states (transposed for [V, K]), NaN outputs.
  auto layout = [&](const std::vector<double> &x) {
    std::vector<double> y =
        served.vFirst ? reference::transposeHeads(x, K, V, false) : x;
    return std::vector<float>(y.begin(), y.end());
  };
  std::vector<float> pool = layout(call.pool);
  std::vector<float> intermediate(expected.intermediate.size(), kSentinel);
  std::vector<uint8_t> nan = reference::nanPattern(spec.dtype), o;
  for (size_t i = 0; i < outputs; ++i)
    o.insert(o.end(), nan.begin(), nan.end());
  std::vector<int32_t> offsets32(packed.cuSeqlens.begin(),
                                 packed.cuSeqlens.end());

  lina_decode::DecodeParams p{};
  p.q = packed.q.data();
  p.k = packed.k.data();
  p.v = packed.v.data();
  p.g = orNull(packed.g);
  p.beta = orNull(packed.beta);
  p.a = orNull(packed.a);
  p.b = orNull(packed.b);
  p.gate_a_log = orNull(packed.gateALog);
  p.gate_dt_bias = orNull(packed.gateDtBias);
  p.o = o.data();
  p.state_in = p.state_out = pool.data();
  p.slots = call.slots.data();
  p.num_accepted = orNull(call.accepted);
  p.num_slots = call.numSlots;
  p.slots_per_token = call.perToken;
  p.batch = int64_t(call.lengths.size());
  p.seq_len = call.perToken ? call.rowWidth : 16;
  p.cu_seqlens = served.int64Offsets
                     ? static_cast<const void *>(packed.cuSeqlens.data())
                     : offsets32.data();
  p.cu_seqlens_i64 = served.int64Offsets;
  p.intermediate = call.numIntermediate ? intermediate.data() : nullptr;
  p.intermediate_rows = orNull(call.intermediateRows);
  p.num_intermediate = call.numIntermediate;
  p.intermediate_steps = call.steps;
  p.disable_state_update = call.disableStateUpdate;
  emulateLaunch<C, VW>(p, warps, served.vFirst);

  auto standard = [&](const std::vector<float> &x) {
    std::vector<double> y(x.begin(), x.end());
    return served.vFirst ? reference::transposeHeads(y, K, V, true) : y;
  };
  Outcome out;
  out.outputError = reference::relativeError(
      reference::decode(o.data(), outputs, spec.dtype), expected.o);
  // Slots the call must not write keep their exact bits.
  std::vector<double> after = standard(pool);
  out.stateError = reference::relativeError(after, expected.pool);
  for (size_t i = 0; i < after.size(); ++i)
    if (!expected.writtenSlots[i / slotSize] && after[i] != call.pool[i])
      out.stateError = std::numeric_limits<double>::infinity();
  if (call.numIntermediate) {
    std::vector<double> got = standard(intermediate);
    out.intermediateError =
        reference::relativeError(got, expected.intermediate);
    for (size_t i = 0; i < got.size(); ++i)
      if (!expected.writtenSteps[i / slotSize] && got[i] != kSentinel)
        out.intermediateError = std::numeric_limits<double>::infinity();
  }
  return out;
}

Spec presetSpec(const char *name, DType dtype, int64_t K = 16) {
  Spec s = findPreset(name)->spec;
  s.keyDim = K;
  s.valueDim = 16;
  s.heads = 1;
  s.valueHeads = 2;
  s.dtype = dtype;
  return s;
}

template <int I, typename T = float, int VW = 4>
void check(DType dtype, const Served &served, int warps) {
  SCOPED_TRACE(kPresetCodes[I].preset);
  Spec spec = presetSpec(kPresetCodes[I].preset, dtype);
  Outcome out = run<PresetConfig<I, T>, VW>(spec, served, warps, 500 + I);
  double limit = reference::tolerance(dtype);
  EXPECT_LE(out.outputError, limit);
  EXPECT_LE(out.stateError, limit);
  EXPECT_LE(out.intermediateError, limit);
}

TEST(DecodeServing, PackedSequencesOfDifferentLengths) {
  // Sequence 1 is empty (an engine's padding): slot 7 must not change.
  // Sequence 3 has no slot: it starts from zero and keeps nothing.
  Served served;
  check<5>(DType::F32, served, 2);
  check<6>(DType::F32, served, 1);
  served.int64Offsets = true;
  check<7, lina_decode::bf16>(DType::BF16, served, 2);
  check<4>(DType::F32, served, 2);
}

TEST(DecodeServing, PackedSpeculativeVerification) {
  // vLLM's spec decode: a row of 4 slots per request, each token's state
  // in its own slot; the call starts from the accepted prefix's slot.
  // Sequence 1 has 3 tokens but starts from its row's 4th slot (15), which
  // it does not write.
  Served served;
  served.call.lengths = {4, 3, 0, 4};
  served.call.perToken = true;
  served.call.rowWidth = 4;
  served.call.numSlots = 17;
  served.call.slots = {1,       2,  3,  4, /**/ 5, 6, 7, 15, /**/ 8, 9, 10, 11,
                       /**/ 12, 13, -1, 16};
  served.call.accepted = {2, 4, 1, 3};
  check<6>(DType::F32, served, 2);
  check<5, float, 8>(DType::F32, served, 1);
}

void expectMatches(const Outcome &out) {
  EXPECT_LE(out.outputError, reference::tolerance(DType::F32));
  EXPECT_LE(out.stateError, reference::tolerance(DType::F32));
}

TEST(DecodeServing, ValueFirstStatePool) {
  // [slots, HV, V, K]: a lane's rows of a column are contiguous. K = 16
  // gives 1 or 2 rows per lane, read by element.
  Served served;
  served.vFirst = true;
  check<6>(DType::F32, served, 2);
  check<6, float, 8>(DType::F32, served, 1);
  check<5, float, 16>(DType::F32, served, 1);
  check<7>(DType::F32, served, 1);
  // K = 64: 2, 4 or 8 rows per lane; 4 and 8 move in 16-byte runs (the
  // emulation aborts on a misaligned one).
  Spec kda = presetSpec("kda", DType::F32, 64);
  kda.scale = 0.25;
  using C64 = Config<float, 64, 16, 1, 2, 3, 1, 0, 1, 0, 0, 0, true, 4>;
  expectMatches(run<C64, 4>(kda, served, 2, 31));
  expectMatches(run<C64, 8>(kda, served, 2, 32));
  expectMatches(run<C64, 16>(kda, served, 1, 33));
  served.call.perToken = true;
  served.call.lengths = {2, 3};
  served.call.rowWidth = 3;
  served.call.slots = {0, 1, -1, /**/ 2, 3, 4};
  served.call.accepted = {3, 1};
  check<6, float, 8>(DType::F32, served, 2);
}

TEST(DecodeServing, IntermediateStatesPerToken) {
  // FlashInfer's verification: states after every token in a buffer
  // indexed by the sequence's slot, the pool left as it was.
  Served served;
  served.call.lengths = {3, 2, 3};
  served.call.slots = {2, 0, 5};
  served.call.numSlots = 6;
  served.call.numIntermediate = 6;
  served.call.steps = 3;
  served.call.disableStateUpdate = true;
  check<6>(DType::F32, served, 2);
  served.vFirst = true;
  check<5, float, 8>(DType::F32, served, 1);
  // Rows of their own (one out of range: kept nowhere), steps past the
  // buffer's (sequence 0 has 3 tokens, 2 steps) skipped, pool updated.
  served.vFirst = false;
  served.call.disableStateUpdate = false;
  served.call.numIntermediate = 2;
  served.call.steps = 2;
  served.call.intermediateRows = {1, 5, 0};
  check<6>(DType::F32, served, 2);
}

} // namespace
