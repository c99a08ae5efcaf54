//===- ForwardChecksTest.cpp - Every rejection of a forward call, no GPU
//---===//
//
// Part of lina. checkForwardArgs and the value checks are pure functions of
// pointers and sizes, so made-up addresses stand in for device memory: they
// are compared, never dereferenced.
//
//===----------------------------------------------------------------------===//
#include "lina/Runtime/ChunkKernel.h"
#include "lina/Runtime/ForwardChecks.h"
#include "lina/Spec/Presets.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <utility>

using namespace lina;
using ::testing::HasSubstr;

namespace {

/// A fake device address: tensors \p slot apart by 64 GiB never overlap,
/// whatever the shape.
const void *at(int slot, uint64_t offsetBytes = 0) {
  return reinterpret_cast<const void *>((uint64_t(slot + 1) << 36) +
                                        offsetBytes);
}
template <typename T> T *ptr(int slot, uint64_t offsetBytes = 0) {
  return reinterpret_cast<T *>(const_cast<void *>(at(slot, offsetBytes)));
}

KernelPlan planFor(const std::string &preset,
                   Strategy strategy = Strategy::FusedScan) {
  KernelPlan plan;
  plan.spec = findPreset(preset)->spec;
  plan.spec.keyDim = 16;
  plan.spec.valueDim = 32;
  plan.spec.heads = 4;
  plan.spec.valueHeads = 8;
  plan.spec.dtype = DType::BF16;
  plan.spec.initialState = true;
  plan.spec.finalState = true;
  plan.strategy = strategy;
  plan.chunkSize = 16;
  plan.tileV = 32;
  return plan;
}

/// A valid call of \p plan: every tensor the spec uses, each at its own slot.
ForwardArgs argsFor(const KernelPlan &plan, int64_t batch = 2,
                    int64_t seqLen = 3) {
  const Spec &s = plan.spec;
  ForwardArgs a;
  a.q = at(0);
  a.k = at(1);
  a.v = at(2);
  a.o = ptr<void>(3);
  if (s.hasGate())
    a.g = ptr<const float>(4);
  if (s.beta != BetaSource::None)
    a.beta = ptr<const float>(5);
  if (s.update == UpdateRule::DPLR) {
    a.a = at(6);
    a.b = at(7);
  }
  if (s.gate != GateSource::Given)
    a.gateALog = ptr<const float>(8);
  if (s.initialState)
    a.initialState = ptr<const float>(9);
  if (s.finalState)
    a.finalState = ptr<float>(10);
  a.batch = batch;
  a.seqLen = seqLen;
  if (s.varlen) {
    a.cuSeqlens = ptr<const int64_t>(11);
    a.batch = 1;
    a.numSequences = 2;
  }
  return a;
}

std::string messageOf(const KernelPlan &plan, const ForwardArgs &args) {
  Status s = checkForwardArgs(plan, args);
  if (s.ok())
    return "";
  EXPECT_EQ(s.code(), StatusCode::InvalidArgument);
  return s.message();
}

TEST(ForwardChecks, ValidCallsOfEveryPresetPass) {
  for (const std::string &name : presetNames())
    for (Strategy strategy : {Strategy::FusedScan, Strategy::Materialize}) {
      KernelPlan plan = planFor(name, strategy);
      EXPECT_EQ(messageOf(plan, argsFor(plan)), "") << name;
      plan.spec.varlen = true;
      EXPECT_EQ(messageOf(plan, argsFor(plan)), "") << name << " varlen";
    }
}

TEST(ForwardChecks, InputsOnlyTheWrittenSpecNamesArePassedOver) {
  // GLA with a write gate written as dplr with a zero a: lina-specialize
  // makes it the additive rule with a weighted write, which reads no b.
  KernelPlan plan = planFor("gla");
  plan.spec.beta = BetaSource::Sigmoid;
  plan.spec.write = WriteWeight::Beta;
  Spec written = plan.spec;
  written.update = UpdateRule::DPLR;
  written.lowRankA = LowRankSource::Zero;
  written.lowRankB = LowRankSource::Input;
  ForwardArgs a = argsFor(plan);
  a.b = at(7);
  // Without the written spec the b is a stray pointer.
  EXPECT_THAT(messageOf(plan, a),
              HasSubstr("'b' was given but the spec does not use it"));
  plan.written = written;
  EXPECT_EQ(messageOf(plan, a), "");
  // The written spec names no a (it is zero): still refused.
  a.a = at(6);
  EXPECT_THAT(messageOf(plan, a),
              HasSubstr("'a' was given but the spec does not use it"));
  // And what the kernel reads stays required.
  a = argsFor(plan);
  a.beta = nullptr;
  EXPECT_THAT(messageOf(plan, a), HasSubstr("'beta' is required"));
}

TEST(ForwardChecks, MissingAndStrayPointers) {
  KernelPlan gdn = planFor("gdn");
  ForwardArgs a = argsFor(gdn);
  a.beta = nullptr;
  EXPECT_THAT(messageOf(gdn, a), HasSubstr("'beta' is required"));
  a = argsFor(gdn);
  a.a = at(6);
  EXPECT_THAT(messageOf(gdn, a),
              HasSubstr("'a' was given but the spec does not use it"));
  a = argsFor(gdn);
  a.gateDtBias = ptr<const float>(8);
  EXPECT_THAT(messageOf(gdn, a),
              HasSubstr("'gateDtBias' was given but the gate is not computed"));
  KernelPlan linear = planFor("linear_attn");
  a = argsFor(linear);
  a.g = ptr<const float>(4);
  EXPECT_THAT(messageOf(linear, a), HasSubstr("'g' was given"));
}

TEST(ForwardChecks, MisalignedTensorsAreRejectedWithTheAlignment) {
  KernelPlan gdn = planFor("gdn");
  size_t align = requiredTensorAlignment(DType::BF16);
  EXPECT_GE(align, 2u);
  EXPECT_EQ(align % kTensorAccessBytes, 0u);
  ForwardArgs a = argsFor(gdn);
  a.q = at(0, align); // aligned, just not at the slot's start
  EXPECT_EQ(messageOf(gdn, a), "");
  a.q = at(0, align / 2);
  EXPECT_THAT(messageOf(gdn, a), HasSubstr("'q' (0x"));
  EXPECT_THAT(messageOf(gdn, a), HasSubstr(") is not aligned to " +
                                           std::to_string(align) + " bytes"));
  a = argsFor(gdn);
  a.o = ptr<void>(3, 1);
  EXPECT_THAT(messageOf(gdn, a), HasSubstr("'o' ("));
  EXPECT_THAT(messageOf(gdn, a), HasSubstr("pass a tensor that starts at"));
  a = argsFor(gdn);
  a.g = ptr<const float>(4, 2);
  EXPECT_THAT(messageOf(gdn, a), HasSubstr("not aligned to 4 bytes"));
  KernelPlan f32 = gdn;
  f32.spec.dtype = DType::F32;
  a = argsFor(f32);
  a.v = at(2, 2);
  EXPECT_THAT(messageOf(f32, a), HasSubstr("'v'"));
  KernelPlan varlen = gdn;
  varlen.spec.varlen = true;
  a = argsFor(varlen);
  a.cuSeqlens = ptr<const int64_t>(11, 4);
  EXPECT_THAT(messageOf(varlen, a), HasSubstr("'cuSeqlens' (0x"));
  EXPECT_THAT(messageOf(varlen, a), HasSubstr("not aligned to 8 bytes"));
}

std::map<std::string, uint64_t> extentBytes(const Spec &spec,
                                            const ForwardArgs &args) {
  std::map<std::string, uint64_t> bytes;
  for (const TensorExtent &e : tensorExtents(spec, args))
    bytes[e.name] = e.bytes;
  return bytes;
}

TEST(ForwardChecks, ExtentsFollowTheShapes) {
  KernelPlan kda = planFor("kda"); // per-channel gate, delta rule
  kda.spec.gate = GateSource::Softplus;
  ForwardArgs a = argsFor(kda, 2, 3);
  a.gateDtBias = ptr<const float>(12);
  std::map<std::string, uint64_t> bytes = extentBytes(kda.spec, a);
  const uint64_t BT = 2 * 3, H = 4, HV = 8, K = 16, V = 32;
  EXPECT_EQ(bytes["q"], BT * H * K * 2);
  EXPECT_EQ(bytes["k"], BT * H * K * 2);
  EXPECT_EQ(bytes["v"], BT * HV * V * 2);
  EXPECT_EQ(bytes["o"], BT * HV * V * 2);
  EXPECT_EQ(bytes["g"], BT * HV * K * 4);
  EXPECT_EQ(bytes["beta"], BT * HV * 4);
  EXPECT_EQ(bytes["gateALog"], HV * 4);
  EXPECT_EQ(bytes["gateDtBias"], HV * K * 4);
  EXPECT_EQ(bytes["initialState"], 2 * HV * K * V * 4);
  EXPECT_EQ(bytes["finalState"], 2 * HV * K * V * 4);
  EXPECT_EQ(bytes.count("a"), 0u);
  EXPECT_EQ(bytes.count("cuSeqlens"), 0u);

  KernelPlan retnet = planFor("retnet"); // g is one log gamma per head
  EXPECT_EQ(extentBytes(retnet.spec, argsFor(retnet))["g"], HV * 4);
  KernelPlan varlen = planFor("gdn");
  varlen.spec.varlen = true;
  ForwardArgs v = argsFor(varlen, 1, 10);
  v.numSequences = 5;
  bytes = extentBytes(varlen.spec, v);
  EXPECT_EQ(bytes["cuSeqlens"], 6u * 8);
  EXPECT_EQ(bytes["finalState"], 5 * HV * K * V * 4);
  EXPECT_EQ(bytes["g"], 10 * HV * 4);
}

TEST(ForwardChecks, OutputsOverlappingInputsAreRejected) {
  KernelPlan gdn = planFor("gdn");
  const uint64_t vBytes = 2 * 3 * 8 * 32 * 2;
  ForwardArgs a = argsFor(gdn);
  a.o = ptr<void>(2, vBytes / 2); // the second half of v
  std::string m = messageOf(gdn, a);
  EXPECT_THAT(m, HasSubstr("'o' (0x"));
  EXPECT_THAT(m, HasSubstr("overlaps 'v'"));
  EXPECT_THAT(m, HasSubstr("pass a separate buffer"));
  a.o = ptr<void>(2, vBytes); // right after v: touching is fine
  EXPECT_EQ(messageOf(gdn, a), "");
  a.o = ptr<void>(2, 0); // the same buffer
  EXPECT_THAT(messageOf(gdn, a), HasSubstr("overlaps 'v'"));
  a = argsFor(gdn);
  a.o = const_cast<void *>(a.q);
  EXPECT_THAT(messageOf(gdn, a), HasSubstr("overlaps 'q'"));
  a = argsFor(gdn);
  a.finalState = const_cast<float *>(a.initialState); // in place
  EXPECT_THAT(messageOf(gdn, a), HasSubstr("'finalState'"));
  EXPECT_THAT(messageOf(gdn, a), HasSubstr("overlaps 'initialState'"));
  a = argsFor(gdn);
  a.finalState = static_cast<float *>(a.o) + 4; // two outputs sharing bytes
  EXPECT_THAT(messageOf(gdn, a), HasSubstr("'o'"));
  EXPECT_THAT(messageOf(gdn, a), HasSubstr("overlaps 'finalState'"));
  a = argsFor(gdn);
  a.o = ptr<void>(5, 64); // inside beta, aligned for any access width
  EXPECT_THAT(messageOf(gdn, a), HasSubstr("overlaps 'beta'"));
  a = argsFor(gdn, 2, 0); // T = 0: o is empty and overlaps nothing
  a.o = const_cast<void *>(a.q);
  EXPECT_EQ(messageOf(gdn, a), "");
}

TEST(ForwardChecks, ShapeErrors) {
  KernelPlan gdn = planFor("gdn");
  ForwardArgs a = argsFor(gdn, 0, 3);
  EXPECT_THAT(messageOf(gdn, a), HasSubstr("batch must be at least 1"));
  a = argsFor(gdn, 1, -1);
  EXPECT_THAT(messageOf(gdn, a), HasSubstr("seqLen at least 0"));
  KernelPlan varlen = gdn;
  varlen.spec.varlen = true;
  a = argsFor(varlen);
  a.batch = 2;
  EXPECT_THAT(messageOf(varlen, a), HasSubstr("batch must be 1"));
  a = argsFor(varlen);
  a.numSequences = 0;
  EXPECT_THAT(messageOf(varlen, a), HasSubstr("numSequences at least 1"));
  a = argsFor(gdn, 1, std::numeric_limits<int64_t>::max() / 2);
  EXPECT_THAT(messageOf(gdn, a), HasSubstr("the call is too large"));
  KernelPlan materialize = planFor("gdn", Strategy::Materialize);
  a = argsFor(materialize, 1, 16 * 65536);
  EXPECT_THAT(messageOf(materialize, a), HasSubstr("more than 65535 chunks"));
  a = argsFor(materialize, 1, 16 * 65535);
  EXPECT_EQ(messageOf(materialize, a), "");
}

TEST(ForwardChecks, Needs64BitIndexAtTwoToThe31Elements) {
  KernelPlan gdn = planFor("gdn");
  gdn.spec.valueHeads = 32;
  gdn.spec.heads = 32;
  gdn.spec.keyDim = 128;
  gdn.spec.valueDim = 128;
  gdn.tileV = 64;
  // v and o hold T * 32 * 128 = T * 2^12 elements.
  EXPECT_TRUE(needs64BitIndex(gdn, 1, 1 << 20, 0));        // 2^32
  EXPECT_TRUE(needs64BitIndex(gdn, 1, 1 << 19, 0));        // exactly 2^31
  EXPECT_FALSE(needs64BitIndex(gdn, 1, (1 << 19) - 1, 0)); // 2^31 - 2^12
  EXPECT_TRUE(needs64BitIndex(gdn, 2, 1 << 18, 0));        // B counts too
  EXPECT_TRUE(needs64BitIndex(gdn, 1, std::numeric_limits<int64_t>::max(), 0));
  // The materialize workspace holds one K x V state per chunk: with 32-token
  // chunks it is 4x the output, so it crosses first.
  KernelPlan materialize = gdn;
  materialize.strategy = Strategy::Materialize;
  materialize.chunkSize = 32;
  EXPECT_FALSE(needs64BitIndex(gdn, 1, 1 << 17, 0));
  EXPECT_TRUE(needs64BitIndex(materialize, 1, 1 << 17, 0));
  // Many short sequences: the states [N, HV, K, V] alone.
  KernelPlan varlen = gdn;
  varlen.spec.varlen = true;
  EXPECT_TRUE(needs64BitIndex(varlen, 1, 1 << 17, 1 << 17));
  EXPECT_FALSE(needs64BitIndex(varlen, 1, 1 << 17, 1));

  // A plan with 32-bit offsets refuses exactly those calls.
  gdn.index64 = false;
  EXPECT_EQ(messageOf(gdn, argsFor(gdn, 1, (1 << 19) - 1)), "");
  EXPECT_THAT(messageOf(gdn, argsFor(gdn, 1, 1 << 20)),
              HasSubstr("kernel computes 32-bit offsets"));
  gdn.index64 = true;
  EXPECT_EQ(messageOf(gdn, argsFor(gdn, 1, 1 << 20)), "");
}

TEST(ForwardChecks, CuSeqlensValues) {
  const int64_t good[] = {0, 3, 3, 10};
  EXPECT_TRUE(checkCuSeqlensValues(good, 4, 10).ok());
  const int64_t late[] = {1, 3, 10};
  EXPECT_THAT(checkCuSeqlensValues(late, 3, 10).message(),
              HasSubstr("must start at 0, got cuSeqlens[0] = 1"));
  const int64_t down[] = {0, 5, 4, 10};
  EXPECT_THAT(checkCuSeqlensValues(down, 4, 10).message(),
              HasSubstr("must be non-decreasing, but cuSeqlens[1] = 5 > "
                        "cuSeqlens[2] = 4"));
  const int64_t shortEnd[] = {0, 5, 9};
  EXPECT_THAT(checkCuSeqlensValues(shortEnd, 3, 10).message(),
              HasSubstr("must end at T = 10, got cuSeqlens[2] = 9"));
  const int64_t longEnd[] = {0, 5, 11};
  EXPECT_FALSE(checkCuSeqlensValues(longEnd, 3, 10).ok());
  EXPECT_THAT(checkCuSeqlensValues(good, 1, 0).message(),
              HasSubstr("N + 1 >= 2 entries"));
}

TEST(ForwardChecks, NonFiniteGates) {
  float g[] = {-0.5f, -1.0f, 0.0f, -2.0f};
  EXPECT_TRUE(checkFiniteValues("g", g, 4).ok());
  g[2] = std::nanf("");
  EXPECT_THAT(checkFiniteValues("g", g, 4).message(),
              HasSubstr("'g' holds NaN at element 2"));
  EXPECT_THAT(checkFiniteValues("g", g, 4, 1000).message(),
              HasSubstr("at element 1002"));
  g[2] = 0.0f;
  g[3] = -std::numeric_limits<float>::infinity();
  EXPECT_THAT(checkFiniteValues("beta", g, 4).message(),
              HasSubstr("'beta' holds Inf at element 3"));
  EXPECT_TRUE(checkFiniteValues("beta", g, 3).ok());
}

} // namespace

namespace {

/// Exits 0 when LINA_CHECK_INPUTS=\p value turns the value checks on. Run in
/// a child: the answer is read once per process.
void exitWithRequest(const char *value) {
  setenv("LINA_CHECK_INPUTS", value, 1);
  std::exit(inputChecksRequestedByEnvironment() ? 0 : 1);
}

TEST(ForwardChecksDeathTest, CheckInputsEnvironmentVariable) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(exitWithRequest("1"), ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(exitWithRequest("yes"), ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(exitWithRequest("0"), ::testing::ExitedWithCode(1), "");
  EXPECT_EXIT(exitWithRequest(""), ::testing::ExitedWithCode(1), "");
}

} // namespace

namespace lina {
namespace {

// A call cuts T into as many pieces as the plan allows, each
// ceil(T / segments) tokens rounded up to whole chunks but the last, which
// takes what is left; plans without segments run whole sequences.
TEST(SegmentsFor, PiecesOfWholeChunksButTheLast) {
  KernelPlan plan;
  plan.spec = findPreset("mamba2")->spec;
  plan.chunkSize = 16;
  plan.segments = 8;
  ForwardArgs args;
  auto pieces = [&](int64_t seqLen) {
    args.seqLen = seqLen;
    SequencePieces p = segmentsFor(plan, args, /*smCount=*/132);
    return std::pair<int64_t, int64_t>(p.count, p.length);
  };
  using Pieces = std::pair<int64_t, int64_t>;
  EXPECT_EQ(pieces(16384), Pieces(8, 2048));
  EXPECT_EQ(pieces(16381), Pieces(8, 2048)); // prime: the last has 2045
  EXPECT_EQ(pieces(1000), Pieces(8, 128));   // 125 -> 128; the last 104
  EXPECT_EQ(pieces(64), Pieces(4, 16));      // 8 tokens -> a chunk
  EXPECT_EQ(pieces(65), Pieces(5, 16));      // the last piece one token
  EXPECT_EQ(pieces(21), Pieces(2, 16));
  EXPECT_EQ(pieces(16), Pieces(1, 16));      // one chunk: whole
  EXPECT_EQ(pieces(0), Pieces(1, 0));
  EXPECT_EQ(pieces(48), Pieces(3, 16));
  plan.chunkSize = 64;
  EXPECT_EQ(pieces(1000), Pieces(8, 128));
  EXPECT_EQ(pieces(300), Pieces(5, 64));
  plan.chunkSize = 16;
  plan.segments = 1;
  EXPECT_EQ(pieces(16384), Pieces(1, 16384));
}

// Packed sequences: the device cuts each by its own length; the host picks
// how many pieces a call takes from its sequences' heads and bounds a
// piece by the packed total's.
TEST(SegmentsFor, PackedSequencesByTheirHeads) {
  KernelPlan plan;
  plan.spec = findPreset("mamba2")->spec;
  plan.spec.varlen = true;
  plan.spec.valueHeads = plan.spec.heads = 16;
  plan.chunkSize = 16;
  plan.segments = 8;
  ForwardArgs args;
  args.seqLen = 32768; // the packed total
  auto pieces = [&](int64_t sequences, int64_t smCount = 132) {
    args.numSequences = sequences;
    SequencePieces p = segmentsFor(plan, args, smCount);
    return std::pair<int64_t, int64_t>(p.count, p.length);
  };
  using Pieces = std::pair<int64_t, int64_t>;
  EXPECT_EQ(pieces(1), Pieces(8, 4096));
  EXPECT_EQ(pieces(2), Pieces(8, 4096));  // 32 heads: 8 pieces, 256 CTAs
  EXPECT_EQ(pieces(3), Pieces(5, 6560));  // 48 heads: five pieces
  EXPECT_EQ(pieces(4), Pieces(4, 8192));  // 64 heads: four
  EXPECT_EQ(pieces(5), Pieces(1, 32768)); // 80 heads: over half the SMs
  EXPECT_EQ(pieces(2, 64), Pieces(4, 8192));
  plan.segments = 16;
  EXPECT_EQ(pieces(1), Pieces(16, 2048));
  // 16 heads on 100 SMs: 12 pieces keep within two CTAs an SM.
  EXPECT_EQ(pieces(1, 100), Pieces(12, 2736));
  args.seqLen = 16; // one chunk in all: nothing to cut
  EXPECT_EQ(pieces(1), Pieces(1, 16));
  args.seqLen = 32768;
  EXPECT_EQ(pieces(0), Pieces(1, 32768));
  plan.segments = 1;
  EXPECT_EQ(pieces(1), Pieces(1, 32768));
}

} // namespace
} // namespace lina
