//===- DecodeEmulationTest.cpp - The decode kernel's code on the CPU ----===//
//
// Part of lina. Decode.cuh compiled as host C++ (DecodeEmulation.h) runs the
// grid a DecodeKernel launches, lane by lane, on small problems; its outputs
// and state pool must match the float64 decode semantics
// (runDecodeReference) within the GPU suite's tolerances, and every slot the
// call must not write must be left bit for bit as it was. This checks the
// kernel's indexing, lane mapping, reductions and slot logic for every
// preset without a GPU; NVRTC compiles the same text in DecodePlanTest.
//
//===----------------------------------------------------------------------===//
#include "DecodePresetCodes.h"

#include "lina/Reference/DecodeReference.h"
#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>

// Last: the emulated device defines the CUDA keywords as macros.
#include "DecodeEmulation.h"

using namespace lina;
using namespace lina::decodetest;
using reference::DecodeProblem;
using reference::DecodeResult;

namespace {

/// Where the state comes from and goes in one call.
struct Layout {
  int64_t batch = 3, seqLen = 4;
  bool pool = true; ///< the pool form; else fla's initial/final state
  int64_t numSlots = 5;
  std::vector<int32_t> slots = {3, -1, 0};
  bool perToken = false;
  std::vector<int32_t> accepted;
  bool initialState = true; ///< fla form: an initial state is given
  /// Shift q, k and g by one element off their (16-byte) allocation: the
  /// kernel must fall back from chunked to element reads.
  bool misaligned = false;
};

/// `bytes` copied to `offset` bytes into a fresh buffer kept in `keep`.
template <typename T>
const void *shifted(const std::vector<T> &bytes, size_t offset,
                    std::vector<std::vector<uint8_t>> &keep) {
  if (bytes.empty())
    return nullptr;
  keep.emplace_back(bytes.size() * sizeof(T) + 16);
  std::memcpy(keep.back().data() + offset, bytes.data(),
              bytes.size() * sizeof(T));
  return keep.back().data() + offset;
}

struct Outcome {
  double outputError = std::numeric_limits<double>::infinity();
  double stateError = std::numeric_limits<double>::infinity();
  bool untouchedSlotsKept = false;
};

template <typename T> const T *orNull(const std::vector<T> &v) {
  return v.empty() ? nullptr : v.data();
}

/// Runs the emulated kernel on a random problem for `spec` and compares it
/// with runDecodeReference on the same (rounded) inputs.
template <class C, int VW>
Outcome run(const Spec &spec, const Layout &layout, int warps, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Spec stepSpec = spec;
  stepSpec.initialState = false;
  DecodeProblem dp;
  dp.step =
      reference::randomProblem(stepSpec, layout.batch, layout.seqLen, rng);
  reference::HostInputs in = reference::encodeProblem(dp.step);
  const int64_t slotSize = spec.valueHeads * spec.keyDim * spec.valueDim;
  std::normal_distribution<double> normal;
  dp.numSlots = layout.pool ? layout.numSlots : layout.batch;
  dp.pool.resize(dp.numSlots * slotSize);
  for (double &x : dp.pool)
    x = layout.pool || layout.initialState ? float(normal(rng)) : 0.0;
  if (layout.pool) {
    dp.slots = layout.slots;
    dp.perToken = layout.perToken;
    dp.numAccepted = layout.accepted;
  } else {
    for (int32_t b = 0; b < layout.batch; ++b)
      dp.slots.push_back(b);
  }
  DecodeResult expected = reference::runDecodeReference(dp);

  std::vector<float> pool(dp.pool.begin(), dp.pool.end());
  std::vector<float> finalState(pool.size(),
                                std::numeric_limits<float>::quiet_NaN());
  const size_t outputs =
      size_t(layout.batch * layout.seqLen * spec.valueHeads * spec.valueDim);
  std::vector<uint8_t> nan = reference::nanPattern(spec.dtype), o;
  for (size_t i = 0; i < outputs; ++i)
    o.insert(o.end(), nan.begin(), nan.end());

  lina_decode::DecodeParams p{};
  p.q = in.q.data();
  p.k = in.k.data();
  p.v = in.v.data();
  p.g = orNull(in.g);
  p.beta = orNull(in.beta);
  p.a = orNull(in.a);
  p.b = orNull(in.b);
  p.gate_a_log = orNull(in.gateALog);
  p.gate_dt_bias = orNull(in.gateDtBias);
  p.o = o.data();
  std::vector<std::vector<uint8_t>> keep;
  if (layout.misaligned) {
    size_t el = reference::elementBytes(spec.dtype);
    p.q = shifted(in.q, el, keep);
    p.k = shifted(in.k, el, keep);
    p.g = static_cast<const float *>(shifted(in.g, 4, keep));
  }
  p.batch = layout.batch;
  p.seq_len = layout.seqLen;
  if (layout.pool) {
    p.state_in = pool.data();
    p.state_out = pool.data();
    p.slots = layout.slots.data();
    p.num_accepted = orNull(layout.accepted);
    p.num_slots = layout.numSlots;
    p.slots_per_token = layout.perToken;
  } else {
    p.state_in = layout.initialState ? pool.data() : nullptr;
    p.state_out = finalState.data();
    p.num_slots = layout.batch;
  }
  emulateLaunch<C, VW>(p, warps);

  Outcome out;
  out.outputError = reference::relativeError(
      reference::decode(o.data(), outputs, spec.dtype), expected.o);
  const std::vector<float> &after = layout.pool ? pool : finalState;
  std::vector<double> state(after.begin(), after.end());
  out.stateError = reference::relativeError(state, expected.pool);
  // Slots nobody writes keep their exact bits.
  out.untouchedSlotsKept =
      !layout.pool || reference::firstChangedUnwrittenElement(dp, state) < 0;
  return out;
}

Spec presetSpec(const char *name, DType dtype, int64_t K = 16, int64_t V = 16,
                int64_t H = 1, int64_t HV = 2) {
  Spec s = findPreset(name)->spec;
  s.keyDim = K;
  s.valueDim = V;
  s.heads = H;
  s.valueHeads = HV;
  s.dtype = dtype;
  return s;
}

void expectMatches(const Outcome &out, DType dtype) {
  double limit = reference::tolerance(dtype);
  EXPECT_LE(out.outputError, limit);
  EXPECT_LE(out.stateError, limit);
  EXPECT_TRUE(out.untouchedSlotsKept);
}

template <int I, typename T = float, int VW = 4>
void checkPreset(DType dtype, const Layout &layout, int warps) {
  SCOPED_TRACE(kPresetCodes[I].preset);
  Spec spec = presetSpec(kPresetCodes[I].preset, dtype);
  expectMatches(run<PresetConfig<I, T>, VW>(spec, layout, warps, 1000 + I),
                dtype);
}

TEST(DecodeEmulation, EveryPresetWithSlotsAndGroupedHeads) {
  // Slot 3 and 0 are read and written, sequence 1 has none (starts at zero,
  // keeps nothing), slots 1, 2 and 4 must not change.
  Layout layout;
  checkPreset<0>(DType::F32, layout, 2);
  checkPreset<1>(DType::F32, layout, 2);
  checkPreset<2>(DType::F32, layout, 2);
  checkPreset<3>(DType::F32, layout, 2);
  checkPreset<4>(DType::F32, layout, 2);
  checkPreset<5>(DType::F32, layout, 2);
  checkPreset<6>(DType::F32, layout, 2);
  checkPreset<7>(DType::F32, layout, 2);
}

TEST(DecodeEmulation, SixteenBitInputs) {
  Layout layout;
  layout.seqLen = 2;
  checkPreset<5, lina_decode::bf16>(DType::BF16, layout, 1);
  checkPreset<6, lina_decode::bf16>(DType::BF16, layout, 4);
  checkPreset<7, lina_decode::f16>(DType::F16, layout, 2);
}

TEST(DecodeEmulation, EveryWarpWidthAndPartialTiles) {
  // 3 warps of 4 columns cover 12 of 16: the second CTA's last two warps
  // have no columns and must leave without touching anything.
  Layout layout;
  layout.seqLen = 1;
  checkPreset<6, float, 4>(DType::F32, layout, 3);
  checkPreset<6, float, 8>(DType::F32, layout, 1);
  checkPreset<6, float, 16>(DType::F32, layout, 1);
  checkPreset<7, float, 16>(DType::F32, layout, 2);
}

TEST(DecodeEmulation, KeyRowsThatDoNotFillTheLanes) {
  // K = 20: with 8 columns per warp, 16 row groups of 2 rows leave 12 rows
  // empty; with 16, 8 groups of 3 leave 4.
  Layout layout;
  layout.seqLen = 3;
  Spec spec = presetSpec("kda", DType::F32, 20, 16);
  spec.scale = 0.25;
  using C = Config<float, 20, 16, 1, 2, 3, 1, 0, 1, 0, 0, 0, true, 4>;
  expectMatches(run<C, 8>(spec, layout, 2, 7), DType::F32);
  expectMatches(run<C, 16>(spec, layout, 1, 8), DType::F32);
}

TEST(DecodeEmulation, ChunkedRowReads) {
  // K = 64: a lane's run of rows is 2, 4 or 8 elements at 4, 8 or 16
  // columns per warp, so f32 and bf16 runs are read 8 or 16 bytes at a
  // time, or one element at a time (bf16 at width 4); misaligned tensors
  // fall back to elements.
  Layout layout;
  layout.seqLen = 2;
  Spec f32 = presetSpec("kda", DType::F32, 64, 16);
  Spec bf16 = presetSpec("kda", DType::BF16, 64, 16);
  f32.scale = bf16.scale = 0.25;
  using F = Config<float, 64, 16, 1, 2, 3, 1, 0, 1, 0, 0, 0, true, 4>;
  using H =
      Config<lina_decode::bf16, 64, 16, 1, 2, 3, 1, 0, 1, 0, 0, 0, true, 4>;
  auto &reads16 = lina_decode::chunked_reads16;
  auto &reads8 = lina_decode::chunked_reads8;
  long before16 = reads16, before8 = reads8;
  expectMatches(run<F, 4>(f32, layout, 2, 21), DType::F32); // 8-byte runs
  EXPECT_GT(reads8, before8);
  expectMatches(run<F, 8>(f32, layout, 2, 22), DType::F32);
  expectMatches(run<F, 16>(f32, layout, 1, 23), DType::F32);
  EXPECT_GT(reads16, before16);
  expectMatches(run<H, 4>(bf16, layout, 2, 24), DType::BF16); // elements
  expectMatches(run<H, 8>(bf16, layout, 2, 25), DType::BF16);
  expectMatches(run<H, 16>(bf16, layout, 1, 26), DType::BF16);
  layout.misaligned = true;
  before16 = reads16, before8 = reads8;
  expectMatches(run<F, 16>(f32, layout, 1, 27), DType::F32);
  expectMatches(run<H, 16>(bf16, layout, 1, 28), DType::BF16);
  EXPECT_EQ(reads16, before16); // q, k and g fell back to elements
  EXPECT_EQ(reads8, before8);
  // dplr reads a and b in chunks too.
  Spec rwkv = presetSpec("rwkv7", DType::BF16, 64, 16);
  rwkv.scale = 0.25;
  using R =
      Config<lina_decode::bf16, 64, 16, 1, 2, 3, 2, 0, 0, 0, 0, 0, false, 4>;
  layout.misaligned = false;
  expectMatches(run<R, 16>(rwkv, layout, 1, 29), DType::BF16);
}

TEST(DecodeEmulation, SpeculativeDecodingKeepsEveryTokenState) {
  // Sequence 0 starts from the state after its 2nd token of the previous
  // call (slot 5), sequence 1 from its 1st (slot 1), sequence 2 from its
  // 3rd (slot 8); token states go to their own slots, -1 keeps none.
  Layout layout;
  layout.seqLen = 3;
  layout.numSlots = 10;
  layout.perToken = true;
  layout.slots = {4, 5, 6, /**/ 1, -1, 2, /**/ 7, 0, 8};
  layout.accepted = {2, 1, 3};
  checkPreset<5>(DType::F32, layout, 2);
  checkPreset<7>(DType::F32, layout, 1);
  // A count outside 1..T starts from zero; without counts, the first slot.
  layout.accepted = {0, 4, 1};
  checkPreset<6>(DType::F32, layout, 2);
  layout.accepted.clear();
  checkPreset<3>(DType::F32, layout, 2);
  // The most tokens a call takes, every one kept in its own slot.
  layout.batch = 2;
  layout.seqLen = 16;
  layout.numSlots = 34;
  layout.slots.clear();
  for (int32_t slot = 33; slot > 1; --slot)
    layout.slots.push_back(slot);
  layout.slots[20] = -1;
  layout.accepted = {16, 7};
  checkPreset<6>(DType::F32, layout, 1);
}

TEST(DecodeEmulation, FlaFormWithAndWithoutInitialState) {
  Layout layout;
  layout.pool = false;
  checkPreset<5>(DType::F32, layout, 2);
  layout.initialState = false;
  checkPreset<6>(DType::F32, layout, 2);
}

TEST(DecodeEmulation, OutOfRangeSlotsAreNoSlot) {
  Layout layout;
  layout.slots = {5, 2, 1000}; // numSlots is 5
  checkPreset<4>(DType::F32, layout, 2);
}

TEST(DecodeEmulation, ComputedGatesAndBeta) {
  Layout layout;
  // KDA: g = -exp(A_log) softplus(x + dt_bias), beta = sigmoid(x).
  Spec kda = presetSpec("kda", DType::F32);
  kda.gate = GateSource::Softplus;
  kda.beta = BetaSource::Sigmoid;
  using Kda = Config<float, 16, 16, 1, 2, 3, 1, 1, 2, 0, 0, 0, true, 4>;
  expectMatches(run<Kda, 4>(kda, layout, 2, 11), DType::F32);
  // GDN: g = -3 sigmoid(exp(A_log)(x + dt_bias)), beta = 2 sigmoid(x).
  Spec gdn = presetSpec("gdn", DType::F32);
  gdn.gate = GateSource::LowerBound;
  gdn.gateLowerBound = -3.0;
  gdn.beta = BetaSource::TwoSigmoid;
  using Gdn = Config<float, 16, 16, 1, 2, 2, 1, 2, 3, 0, 0, 0, true, 4, 3>;
  expectMatches(run<Gdn, 8>(gdn, layout, 1, 12), DType::F32);
}

TEST(DecodeEmulation, AdditiveRuleWithAWeightedWrite) {
  // GLA writing beta k v^T (write = beta): the kernel scales the value it
  // writes by beta, and by nothing on the unit write.
  Layout layout;
  Spec spec = presetSpec("gla", DType::F32);
  spec.write = WriteWeight::Beta;
  spec.beta = BetaSource::Given;
  using C = Config<float, 16, 16, 1, 2, 3, 0, 0, 1, 0, 0, 1, false, 4>;
  expectMatches(run<C, 4>(spec, layout, 2, 14), DType::F32);
}

TEST(DecodeEmulation, TiedLowRankVectors) {
  // a = -(exp(g) . k), b = beta k with a unit write: not the delta rule,
  // so it stays dplr and reads its vectors from k and beta in the kernel.
  Layout layout;
  Spec spec = presetSpec("rwkv7", DType::F32);
  spec.lowRankA = LowRankSource::NegDecayedKey;
  spec.lowRankB = LowRankSource::BetaKey;
  spec.beta = BetaSource::Given;
  spec.qkL2Norm = true;
  using C = Config<float, 16, 16, 1, 2, 3, 2, 0, 1, 3, 2, 0, true, 4>;
  expectMatches(run<C, 4>(spec, layout, 2, 13), DType::F32);
}

} // namespace
