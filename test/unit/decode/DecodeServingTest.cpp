//===- DecodeServingTest.cpp - Serving engines' layouts, emulated -------===//
//
// Part of lina. The decode kernel's code (Decode.cuh on the CPU, as in
// DecodeEmulationTest) on the layouts serving engines call it with: packed
// tokens with int32 or int64 cu_seqlens, sequences of different lengths
// (an empty one among them), the pool in [V, K] order, the states after
// every token in an intermediate buffer, and disable_state_update. The
// expected values are the float64 decode semantics run one sequence at a
// time: a packed call must equal each sequence's own [1, T] call.
//
//===----------------------------------------------------------------------===//
#include "DecodeEmulation.h"
#include "DecodePresetCodes.h"

#include "lina/Reference/DecodeReference.h"
#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>

using namespace lina;
using namespace lina::decodetest;
using reference::DecodeProblem;

namespace {

constexpr float kSentinel = -1234.5f; // a buffer value nothing may write

/// One call in the engines' layouts.
struct Served {
  std::vector<int64_t> lengths = {2, 0, 3, 1}; ///< tokens per sequence
  bool int64Offsets = false;
  bool vFirst = false;
  int64_t numSlots = 9;
  /// [N], or with perToken [N, rowWidth].
  std::vector<int32_t> slots = {4, 7, 0, -1};
  bool perToken = false;
  int64_t rowWidth = 0;
  std::vector<int32_t> accepted;
  /// Intermediate states: [numIntermediate, steps, HV, K, V], or none.
  int64_t numIntermediate = 0, steps = 0;
  std::vector<int32_t> intermediateRows;
  bool disableStateUpdate = false;
};

struct Outcome {
  double outputError = std::numeric_limits<double>::infinity();
  double stateError = std::numeric_limits<double>::infinity();
  double intermediateError = 0.0;
};

template <typename T> const T *orNull(const std::vector<T> &v) {
  return v.empty() ? nullptr : v.data();
}

/// Each slot's [HV][K][V] heads as [HV][V][K], or back with `back`.
std::vector<double> transposeHeads(const std::vector<double> &x, int64_t K,
                                   int64_t V, bool back) {
  std::vector<double> out(x.size());
  const int64_t head = K * V;
  for (size_t h = 0; h < x.size() / head; ++h)
    for (int64_t r = 0; r < K; ++r)
      for (int64_t c = 0; c < V; ++c) {
        size_t kv = h * head + r * V + c, vk = h * head + c * K + r;
        if (back)
          out[kv] = x[vk];
        else
          out[vk] = x[kv];
      }
  return out;
}

/// Appends `bytes` (a [1, T, ...] tensor's) to the packed tensor `to`.
template <typename T>
void append(std::vector<T> &to, const std::vector<T> &bytes) {
  to.insert(to.end(), bytes.begin(), bytes.end());
}

/// The state sequence `n` starts from, per the decode semantics.
std::vector<double> startState(const DecodeProblem &dp, int64_t slotSize) {
  int64_t read = reference::decodeReadSlot(dp, 0);
  if (read < 0)
    return std::vector<double>(slotSize, 0.0);
  return std::vector<double>(dp.pool.begin() + read * slotSize,
                             dp.pool.begin() + (read + 1) * slotSize);
}

/// The state after the first `n` tokens of `seq` from `start`: the [B]
/// form of the reference on a one-slot pool.
std::vector<double> stateAfter(const reference::Problem &seq, int64_t n,
                               const std::vector<double> &start) {
  DecodeProblem one;
  one.step = reference::sliceTokens(seq, 0, n);
  one.pool = start;
  one.numSlots = 1;
  one.slots = {0};
  return reference::runDecodeReference(one).pool;
}

template <class C, int VW>
Outcome run(const Spec &spec, const Served &call, int warps, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Spec stepSpec = spec;
  stepSpec.initialState = false;
  const int64_t N = int64_t(call.lengths.size());
  const int64_t HV = spec.valueHeads, K = spec.keyDim, V = spec.valueDim;
  const int64_t slotSize = HV * K * V, row = HV * V;
  const int64_t width = call.perToken ? call.rowWidth : 1;

  std::normal_distribution<double> normal;
  std::vector<double> pool(call.numSlots * slotSize);
  for (double &x : pool)
    x = float(normal(rng));
  std::vector<double> intermediate(call.numIntermediate * call.steps * slotSize,
                                   kSentinel);

  // Each sequence is a problem of its own; the packed inputs are theirs
  // end to end, and the expected values their own calls' results.
  reference::HostInputs packed;
  std::vector<int64_t> offsets = {0};
  std::vector<double> expectedO, expectedPool = pool;
  std::vector<double> expectedIntermediate = intermediate;
  std::vector<bool> written(call.numSlots, false);
  reference::Problem first;
  for (int64_t n = 0; n < N; ++n) {
    const int64_t L = call.lengths[n];
    offsets.push_back(offsets.back() + L);
    if (L == 0)
      continue;
    reference::Problem seq = reference::randomProblem(stepSpec, 1, L, rng);
    if (first.seqLen == 0)
      first = seq;
    // Per-head parameters are the call's, not the sequence's.
    seq.gateALog = first.gateALog;
    seq.gateDtBias = first.gateDtBias;
    if (spec.decay == DecayKind::FixedPerHead)
      seq.g = first.g;
    reference::HostInputs in = reference::encodeProblem(seq);
    for (auto [to, from] : {std::pair{&packed.q, &in.q},
                            {&packed.k, &in.k},
                            {&packed.v, &in.v},
                            {&packed.a, &in.a},
                            {&packed.b, &in.b}})
      append(*to, *from);
    if (spec.decay != DecayKind::FixedPerHead)
      append(packed.g, in.g);
    else
      packed.g = in.g;
    append(packed.beta, in.beta);
    packed.gateALog = in.gateALog;
    packed.gateDtBias = in.gateDtBias;

    DecodeProblem dp;
    dp.step = seq;
    dp.pool = expectedPool;
    dp.numSlots = call.numSlots;
    dp.slots.assign(call.slots.begin() + n * width,
                    call.slots.begin() + n * width + (call.perToken ? L : 1));
    dp.perToken = call.perToken;
    if (!call.accepted.empty())
      dp.numAccepted = {call.accepted[n]};
    reference::DecodeResult r = reference::runDecodeReference(dp);
    append(expectedO, r.o);
    if (!call.disableStateUpdate) {
      expectedPool = r.pool;
      std::vector<bool> mine = reference::decodeWrittenSlots(dp);
      for (size_t i = 0; i < mine.size(); ++i)
        written[i] = written[i] || mine[i];
    }
    if (call.numIntermediate) {
      int64_t inter = !call.intermediateRows.empty() ? call.intermediateRows[n]
                      : call.perToken                ? n
                                                     : call.slots[n];
      std::vector<double> start = startState(dp, slotSize);
      for (int64_t t = 0; t < std::min(L, call.steps); ++t)
        if (inter >= 0 && inter < call.numIntermediate) {
          std::vector<double> s = stateAfter(seq, t + 1, start);
          std::copy(s.begin(), s.end(),
                    expectedIntermediate.begin() +
                        (inter * call.steps + t) * slotSize);
        }
    }
  }
  const int64_t tokens = offsets.back();

  // The kernel's buffers: fp32 states (transposed for [V, K]), NaN outputs.
  auto layout = [&](const std::vector<double> &x) {
    std::vector<double> y = call.vFirst ? transposeHeads(x, K, V, false) : x;
    return std::vector<float>(y.begin(), y.end());
  };
  std::vector<float> devicePool = layout(pool);
  std::vector<float> deviceIntermediate = layout(intermediate);
  std::vector<uint8_t> nan = reference::nanPattern(spec.dtype), o;
  for (int64_t i = 0; i < tokens * row; ++i)
    o.insert(o.end(), nan.begin(), nan.end());
  std::vector<int32_t> offsets32(offsets.begin(), offsets.end());

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
  p.state_in = p.state_out = devicePool.data();
  p.slots = call.slots.data();
  p.num_accepted = orNull(call.accepted);
  p.num_slots = call.numSlots;
  p.slots_per_token = call.perToken;
  p.batch = N;
  p.seq_len = call.perToken ? call.rowWidth : 16;
  p.cu_seqlens = call.int64Offsets ? static_cast<const void *>(offsets.data())
                                   : offsets32.data();
  p.cu_seqlens_i64 = call.int64Offsets;
  p.intermediate = call.numIntermediate ? deviceIntermediate.data() : nullptr;
  p.intermediate_rows = orNull(call.intermediateRows);
  p.num_intermediate = call.numIntermediate;
  p.intermediate_steps = call.steps;
  p.disable_state_update = call.disableStateUpdate;
  emulateLaunch<C, VW>(p, warps, call.vFirst);

  auto standard = [&](const std::vector<float> &x) {
    std::vector<double> y(x.begin(), x.end());
    return call.vFirst ? transposeHeads(y, K, V, true) : y;
  };
  Outcome out;
  out.outputError = reference::relativeError(
      reference::decode(o.data(), size_t(tokens * row), spec.dtype), expectedO);
  // Slots the call must not write keep their exact bits.
  std::vector<double> after = standard(devicePool);
  out.stateError = reference::relativeError(after, expectedPool);
  for (size_t i = 0; i < after.size(); ++i)
    if (!written[i / slotSize] && after[i] != pool[i])
      out.stateError = std::numeric_limits<double>::infinity();
  if (call.numIntermediate) {
    std::vector<double> got = standard(deviceIntermediate);
    out.intermediateError = reference::relativeError(got, expectedIntermediate);
    for (size_t i = 0; i < got.size(); ++i)
      if ((expectedIntermediate[i] == kSentinel) != (got[i] == kSentinel))
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
void check(DType dtype, const Served &call, int warps) {
  SCOPED_TRACE(kPresetCodes[I].preset);
  Spec spec = presetSpec(kPresetCodes[I].preset, dtype);
  Outcome out = run<PresetConfig<I, T>, VW>(spec, call, warps, 500 + I);
  double limit = reference::tolerance(dtype);
  EXPECT_LE(out.outputError, limit);
  EXPECT_LE(out.stateError, limit);
  EXPECT_LE(out.intermediateError, limit);
}

TEST(DecodeServing, PackedSequencesOfDifferentLengths) {
  // Sequence 1 is empty (an engine's padding): slot 7 must not change.
  // Sequence 3 has no slot: it starts from zero and keeps nothing.
  Served call;
  check<5>(DType::F32, call, 2);
  check<6>(DType::F32, call, 1);
  call.int64Offsets = true;
  check<7, lina_decode::bf16>(DType::BF16, call, 2);
  check<4>(DType::F32, call, 2);
}

TEST(DecodeServing, PackedSpeculativeVerification) {
  // vLLM's spec decode: a row of 4 slots per request, each token's state
  // in its own slot; the call starts from the accepted prefix's slot.
  Served call;
  call.lengths = {4, 3, 0, 4};
  call.perToken = true;
  call.rowWidth = 4;
  call.numSlots = 17;
  call.slots = {1,       2,  3,  4, /**/ 5, 6, 7, -1, /**/ 8, 9, 10, 11,
                /**/ 12, 13, -1, 16};
  call.accepted = {2, 3, 1, 4};
  check<6>(DType::F32, call, 2);
  check<5, float, 8>(DType::F32, call, 1);
}

void expectMatches(const Outcome &out) {
  EXPECT_LE(out.outputError, reference::tolerance(DType::F32));
  EXPECT_LE(out.stateError, reference::tolerance(DType::F32));
}

TEST(DecodeServing, ValueFirstStatePool) {
  // [slots, HV, V, K]: a lane's rows of a column are contiguous. K = 16
  // gives 1 or 2 rows per lane, read by element.
  Served call;
  call.vFirst = true;
  check<6>(DType::F32, call, 2);
  check<6, float, 8>(DType::F32, call, 1);
  check<5, float, 16>(DType::F32, call, 1);
  check<7>(DType::F32, call, 1);
  // K = 64: 2, 4 or 8 rows per lane; 4 and 8 move in 16-byte runs (the
  // emulation aborts on a misaligned one).
  Spec kda = presetSpec("kda", DType::F32, 64);
  kda.scale = 0.25;
  using C64 = Config<float, 64, 16, 1, 2, 3, 1, 0, 1, 0, 0, 0, true, 4>;
  expectMatches(run<C64, 4>(kda, call, 2, 31));
  expectMatches(run<C64, 8>(kda, call, 2, 32));
  expectMatches(run<C64, 16>(kda, call, 1, 33));
  call.perToken = true;
  call.lengths = {2, 3};
  call.rowWidth = 3;
  call.slots = {0, 1, -1, /**/ 2, 3, 4};
  call.accepted = {3, 1};
  check<6, float, 8>(DType::F32, call, 2);
}

TEST(DecodeServing, IntermediateStatesPerToken) {
  // FlashInfer's verification: states after every token in a buffer
  // indexed by the sequence's slot, the pool left as it was.
  Served call;
  call.lengths = {3, 2, 3};
  call.slots = {2, 0, 5};
  call.numSlots = 6;
  call.numIntermediate = 6;
  call.steps = 3;
  call.disableStateUpdate = true;
  check<6>(DType::F32, call, 2);
  call.vFirst = true;
  check<5, float, 8>(DType::F32, call, 1);
  // Rows of their own (one out of range: kept nowhere), steps past the
  // buffer's (sequence 0 has 3 tokens, 2 steps) skipped, pool updated.
  call.vFirst = false;
  call.disableStateUpdate = false;
  call.numIntermediate = 2;
  call.steps = 2;
  call.intermediateRows = {1, 5, 0};
  check<6>(DType::F32, call, 2);
}

} // namespace
