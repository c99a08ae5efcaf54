//===- BackwardChecksTest.cpp - Every rejection of a backward call -------===//
//
// Part of lina. checkBackwardArgs is a pure function of pointers and sizes,
// so made-up addresses stand in for device memory, as in
// ForwardChecksTest.cpp: compared, never dereferenced.
//
//===----------------------------------------------------------------------===//
#include "lina/Runtime/BackwardChecks.h"
#include "lina/Spec/Presets.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <cstdint>

using namespace lina;
using ::testing::HasSubstr;

namespace {

/// Tensors 64 GiB apart never overlap, whatever the shape.
template <typename T> T *ptr(int slot, uint64_t offsetBytes = 0) {
  return reinterpret_cast<T *>((uint64_t(slot + 1) << 36) + offsetBytes);
}

BackwardPlan planFor(const std::string &preset) {
  BackwardPlan plan;
  plan.spec = findPreset(preset)->spec;
  plan.spec.keyDim = 16;
  plan.spec.valueDim = 32;
  plan.spec.heads = 2;
  plan.spec.valueHeads = 4;
  plan.spec.dtype = DType::BF16;
  plan.spec.initialState = true;
  plan.spec.finalState = true;
  plan.chunkSize = 16;
  plan.tileV = 32;
  return plan;
}

/// A valid call: every input the spec uses and its gradient, each at its
/// own slot, and dL/d(final state).
BackwardArgs argsFor(const BackwardPlan &plan) {
  const Spec &s = plan.spec;
  BackwardArgs a;
  ForwardArgs &f = a.forward;
  f.q = ptr<const void>(0), a.dq = ptr<float>(20);
  f.k = ptr<const void>(1), a.dk = ptr<float>(21);
  f.v = ptr<const void>(2), a.dv = ptr<float>(22);
  if (s.hasGate())
    f.g = ptr<const float>(3), a.dg = ptr<float>(23);
  if (s.beta != BetaSource::None)
    f.beta = ptr<const float>(4), a.dBeta = ptr<float>(24);
  if (s.update == UpdateRule::DPLR) {
    f.a = ptr<const void>(5), a.da = ptr<float>(25);
    f.b = ptr<const void>(6), a.db = ptr<float>(26);
  }
  if (s.gate != GateSource::Given)
    f.gateALog = ptr<const float>(7), a.dGateALog = ptr<float>(27);
  f.initialState = ptr<const float>(8), a.dInitialState = ptr<float>(28);
  a.dO = ptr<const void>(9);
  a.dFinalState = ptr<const float>(10);
  f.batch = 2;
  f.seqLen = 40;
  return a;
}

std::string messageOf(const BackwardPlan &plan, const BackwardArgs &args) {
  Status s = checkBackwardArgs(plan, args);
  if (s.ok())
    return "";
  EXPECT_EQ(s.code(), StatusCode::InvalidArgument);
  return s.message();
}

TEST(BackwardChecks, ValidCallsOfEveryPresetPass) {
  for (const std::string &name : presetNames()) {
    BackwardPlan plan = planFor(name);
    EXPECT_EQ(messageOf(plan, argsFor(plan)), "") << name;
    // dL/d(final state) may be left out (zero).
    BackwardArgs args = argsFor(plan);
    args.dFinalState = nullptr;
    EXPECT_EQ(messageOf(plan, args), "") << name;
  }
}

TEST(BackwardChecks, TheForwardsOutputsAreNotPassed) {
  BackwardPlan plan = planFor("gdn");
  BackwardArgs args = argsFor(plan);
  args.forward.o = ptr<void>(11);
  EXPECT_THAT(messageOf(plan, args),
              HasSubstr("'forward.o' and 'forward.finalState' must be null"));
  args = argsFor(plan);
  args.dO = nullptr;
  EXPECT_THAT(messageOf(plan, args), HasSubstr("'dO' is required"));
}

TEST(BackwardChecks, AFinalStateGradientNeedsAFinalState) {
  BackwardPlan plan = planFor("gdn");
  plan.spec.finalState = false;
  EXPECT_THAT(messageOf(plan, argsFor(plan)),
              HasSubstr("'dFinalState' was given but the spec has no final "
                        "state"));
}

TEST(BackwardChecks, TheForwardsChecksRunOnTheInputs) {
  BackwardPlan plan = planFor("gdn");
  BackwardArgs args = argsFor(plan);
  args.forward.beta = nullptr;
  args.dBeta = nullptr;
  EXPECT_THAT(messageOf(plan, args), HasSubstr("'beta'"));
  args = argsFor(plan);
  args.forward.seqLen = -1;
  EXPECT_THAT(messageOf(plan, args), HasSubstr("seqLen at least 0"));
}

TEST(BackwardChecks, AGradientIsRequiredExactlyWhereItsInputIs) {
  BackwardPlan plan = planFor("kda");
  BackwardArgs args = argsFor(plan);
  args.dg = nullptr;
  EXPECT_THAT(messageOf(plan, args),
              HasSubstr("'dg' is required: 'g' is given"));
  args = argsFor(plan);
  args.da = ptr<float>(25);
  EXPECT_THAT(messageOf(plan, args),
              HasSubstr("'da' was given but 'a' is not: pass null"));
}

TEST(BackwardChecks, InputsOnlyTheWrittenSpecNamesTakeAGradientToo) {
  // GLA with a write gate written as dplr with a zero a: the kernels are
  // the additive rule's, which read no b; the b the caller's spec names
  // may be passed, with its gradient (zeroed, as every gradient is).
  BackwardPlan plan = planFor("gla");
  plan.spec.beta = BetaSource::Sigmoid;
  plan.spec.write = WriteWeight::Beta;
  Spec written = plan.spec;
  written.update = UpdateRule::DPLR;
  written.lowRankA = LowRankSource::Zero;
  written.lowRankB = LowRankSource::Input;
  BackwardArgs args = argsFor(plan);
  args.forward.b = ptr<const void>(6);
  args.db = ptr<float>(26);
  EXPECT_THAT(messageOf(plan, args),
              HasSubstr("'b' was given but the spec does not use it"));
  plan.written = written;
  EXPECT_EQ(messageOf(plan, args), "");
  // The gradient of a given input stays required.
  args.db = nullptr;
  EXPECT_THAT(messageOf(plan, args),
              HasSubstr("'db' is required: 'b' is given"));
}

TEST(BackwardChecks, GradientsAreAlignedAndOverlapNothing) {
  BackwardPlan plan = planFor("gdn");
  BackwardArgs args = argsFor(plan);
  args.dk = ptr<float>(21, 2);
  EXPECT_THAT(messageOf(plan, args), HasSubstr("'dk' must be 4-byte aligned"));
  // dv inside v: read and written at once.
  args = argsFor(plan);
  args.dv = ptr<float>(2, 64);
  EXPECT_THAT(messageOf(plan, args), HasSubstr("'dv' overlaps 'v'"));
  // dq over dL/do.
  args = argsFor(plan);
  args.dq = ptr<float>(9, 4);
  EXPECT_THAT(messageOf(plan, args), HasSubstr("'dq' overlaps 'dO'"));
  // Two gradients in one buffer: dk's 2 x 40 x 2 x 16 fp32 start in dq's.
  args = argsFor(plan);
  args.dk = ptr<float>(20, 4 * 16);
  EXPECT_THAT(messageOf(plan, args),
              HasSubstr("'dk' overlaps 'dq': pass a separate buffer"));
  // Just past dq's end is fine.
  args.dk = ptr<float>(20, 2 * 40 * 2 * 16 * 4);
  EXPECT_EQ(messageOf(plan, args), "");
}

TEST(BackwardChecks, GradientSizesAreTheInputsElements) {
  BackwardPlan plan = planFor("rwkv7");
  BackwardArgs args = argsFor(plan);
  uint64_t tokens = 2 * 40;
  for (const GradientExtent &g : gradientExtents(plan.spec, args)) {
    std::string name = g.name;
    uint64_t expected = name == "dq" || name == "dk" ? tokens * 2 * 16
                        : name == "dv"               ? tokens * 4 * 32
                        : name == "dg" || name == "da" || name == "db"
                            ? tokens * 4 * 16
                        : name == "dInitialState" ? 2 * 4 * 16 * 32
                                                  : 0;
    EXPECT_EQ(g.elements, expected) << name;
  }
}

} // namespace
