//===- DefaultScheduleTest.cpp - The default schedule for a known grid ---===//
//
// Part of lina. Without a tune, kernels of a known shape take
// defaultSchedule(spec, sequences, smCount): a CTA takes a whole d128 head,
// a warp for each 16 value columns, where the heads cover two thirds of the
// SMs; otherwise delta-rule scans widen their value tiles to 64 when every
// multiprocessor still gets a CTA (those without per-channel gates take
// four warps at tv32 instead where tv64 would give fewer than two CTAs an
// SM).
//
//===----------------------------------------------------------------------===//
#include "lina/Codegen/KernelPlanner.h"
#include "lina/Transforms/Pipeline.h"
#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

using namespace lina;

namespace {

Spec preset(const char *name, int64_t dim, int64_t heads) {
  Spec spec = findPreset(name)->spec;
  spec.keyDim = spec.valueDim = dim;
  spec.heads = spec.valueHeads = heads;
  return spec;
}

// A CTA a head, a warp for each 16 value columns (tile-v 128 on eight
// warps: RegisterState::ownColumns), where the heads cover two thirds of
// the SMs; otherwise the delta rules widen to 64 columns where that still
// fills the GPU.
TEST(DefaultSchedule, DeltaRulesTakeWholeHeadsOnLargeGrids) {
  const int64_t h200 = 132;
  for (const char *name : {"gdn", "kda", "deltanet"}) {
    SCOPED_TRACE(name);
    // 1 x 96 heads: 96 CTAs of a whole head, 73% of the SMs.
    Spec large = preset(name, 128, 96);
    ScheduleOptions grid = defaultSchedule(large, 1, h200);
    EXPECT_EQ(grid.tileV, 128);
    EXPECT_EQ(grid.warps, 8);
    // 4 x 64 heads = 256 CTAs of a whole head.
    Spec many = preset(name, 128, 64);
    EXPECT_EQ(defaultSchedule(many, 4, h200).tileV, 128);
    EXPECT_EQ(defaultSchedule(many, 4, h200).warps, 8);
    // 2 x 16 heads: 32 whole heads would leave most SMs idle; tv32 keeps
    // 128 CTAs.
    Spec fewHeads = preset(name, 128, 16);
    EXPECT_EQ(defaultSchedule(fewHeads, 2, h200).tileV, 32);
    EXPECT_EQ(defaultSchedule(fewHeads, 2, h200).warps, 8);
    // 1 x 64 heads (64 CTAs of a head, 128 of tv64): the value tile widens
    // to 64; gdn and DeltaNet keep tv32 on four warps where tv64 would give
    // between one and two CTAs an SM (1 x 96 heads: 192 of tv64).
    Spec someHeads = preset(name, 128, 64);
    bool perChannel = large.decay == DecayKind::PerChannel;
    EXPECT_EQ(defaultSchedule(someHeads, 1, h200).tileV, 32);
    EXPECT_EQ(defaultSchedule(someHeads, 1, h200).warps, 8);
    ScheduleOptions wide = defaultSchedule(preset(name, 128, 80), 1, h200);
    EXPECT_EQ(wide.tileV, perChannel ? 64 : 32);
    EXPECT_EQ(wide.warps, perChannel ? 8 : 4);
    // d64: a 64-column tile would be the whole head (8 x 8 x 1 = 64 CTAs).
    Spec small = preset(name, 64, 8);
    EXPECT_EQ(defaultSchedule(small, 8, h200).tileV, 32);
    EXPECT_EQ(defaultSchedule(small, 8, h200).warps, 8);
    // Unknown shape: the spec's default.
    EXPECT_EQ(defaultSchedule(large, 0, h200).tileV,
              defaultSchedule(large).tileV);
  }
}

// Where the delta rules' whole-head CTAs outnumber the SMs, they ask for
// two an SM (the grid in one wave); with fewer, never (one an SM anyway).
// The additive rules' whole-head scans fit two an SM without asking.
TEST(DefaultSchedule, DeltaRulesWholeHeadsTakeTwoCTAsWhereTheyOutnumberSMs) {
  const int64_t h200 = 132;
  for (const char *name : {"gdn", "kda", "deltanet"}) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(defaultSchedule(preset(name, 128, 64), 4, h200).twoCTAs);
    EXPECT_TRUE(defaultSchedule(preset(name, 128, 96), 2, h200).twoCTAs);
    EXPECT_FALSE(defaultSchedule(preset(name, 128, 96), 1, h200).twoCTAs);
    EXPECT_FALSE(defaultSchedule(preset(name, 128, 132), 1, h200).twoCTAs);
    EXPECT_TRUE(defaultSchedule(preset(name, 128, 133), 1, h200).twoCTAs);
    // Not whole heads: the layouts' own CTA counts stand.
    EXPECT_FALSE(defaultSchedule(preset(name, 128, 16), 2, h200).twoCTAs);
    EXPECT_FALSE(defaultSchedule(preset(name, 128, 96)).twoCTAs);
  }
  for (const char *name : {"mamba2", "gla"})
    EXPECT_FALSE(defaultSchedule(preset(name, 128, 64), 4, h200).twoCTAs)
        << name;
}

// The additive rules with gates take whole heads like the delta rule
// (measured for mamba2 and gla); linear attention (its q is scaled in the
// scan, so its ops do not keep to their columns) widens to 64, and rwkv7
// keeps 32 columns.
TEST(DefaultSchedule, AdditiveRulesWidenToo) {
  for (const char *name : {"retnet", "mamba2", "gla"}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(defaultSchedule(preset(name, 128, 96), 1, 132).tileV, 128);
    EXPECT_EQ(defaultSchedule(preset(name, 128, 96), 1, 132).warps, 8);
    EXPECT_EQ(defaultSchedule(preset(name, 64, 8), 8, 132).tileV, 32);
  }
  EXPECT_EQ(defaultSchedule(preset("linear_attn", 128, 96), 1, 132).tileV, 64);
  EXPECT_EQ(defaultSchedule(preset("rwkv7", 128, 96), 1, 132).tileV, 32);
}

// Every rule splits and prefetches; 16-token chunks, except 32 for the
// scalar-gated additive rules at key_dim <= 64.
TEST(DefaultSchedule, EveryRuleSplitsAndPrefetches) {
  for (const std::string &name : presetNames()) {
    SCOPED_TRACE(name);
    for (int64_t dim : {64, 128}) {
      Spec spec = preset(name.c_str(), dim, 8);
      ScheduleOptions s = defaultSchedule(spec);
      EXPECT_EQ(s.strategy, Strategy::Split);
      EXPECT_TRUE(s.prefetch);
      bool additive = spec.update == UpdateRule::Additive &&
                      spec.decay != DecayKind::PerChannel;
      EXPECT_EQ(s.chunkSize, additive && dim <= 64 ? 32 : 16);
    }
  }
}

// Few long sequences of an additive rule with a decay run in segments,
// whole heads each, as many as keep within two CTAs an SM and 1024 tokens a
// piece; not where whole heads already give more than a quarter of the SMs
// a CTA, nor for an unknown length or a rule that cannot.
TEST(DefaultSchedule, FewLongSequencesRunInSegments) {
  const int64_t h200 = 132;
  for (const char *name : {"retnet", "mamba2", "gla"}) {
    SCOPED_TRACE(name);
    Spec spec = preset(name, 128, 16);
    ScheduleOptions s = defaultSchedule(spec, 2, h200, 16384);
    EXPECT_EQ(s.segments, 8);
    EXPECT_EQ(s.tileV, 128);
    EXPECT_EQ(s.warps, 8);
    EXPECT_EQ(defaultSchedule(spec, 2, h200, 2048).segments, 2);
    EXPECT_EQ(defaultSchedule(spec, 2, h200, 1024).segments, 1);
    // A length no power of two divides: equal pieces but the last.
    EXPECT_EQ(defaultSchedule(spec, 2, h200, 16381).segments, 8);
    EXPECT_EQ(defaultSchedule(spec, 2, h200, 2047).segments, 1);
    EXPECT_EQ(defaultSchedule(spec, 1, h200, 1 << 20).segments, 16);
    // Unknown length: the layout without segments.
    EXPECT_EQ(defaultSchedule(spec, 2, h200).segments, 1);
    EXPECT_EQ(defaultSchedule(spec, 2, h200).tileV, 32);
    // 64 and 96 whole heads: none.
    EXPECT_EQ(defaultSchedule(spec, 4, h200, 2048).segments, 1);
    EXPECT_EQ(defaultSchedule(preset(name, 128, 96), 1, h200, 8192).segments,
              1);
    Spec f32 = spec;
    f32.dtype = DType::F32;
    EXPECT_EQ(defaultSchedule(f32, 2, h200, 16384).segments, 1);
    // Packed: the sequences' number and the longest one's length, as
    // the batch above.
    Spec varlen = spec;
    varlen.varlen = true;
    EXPECT_EQ(defaultSchedule(varlen, 2, h200, 16384).segments, 8);
    EXPECT_EQ(defaultSchedule(varlen, 2, h200, 16384).tileV, 128);
    EXPECT_EQ(defaultSchedule(varlen, 2, h200, 1024).segments, 1);
  }
  for (const char *name : {"gdn", "kda", "deltanet", "rwkv7", "linear_attn"})
    EXPECT_EQ(defaultSchedule(preset(name, 128, 16), 2, h200, 16384).segments,
              1)
        << name;
}

TEST(DefaultSchedule, OtherRulesKeepTheSpecDefault) {
  for (const char *name : {"rwkv7"}) {
    SCOPED_TRACE(name);
    Spec large = preset(name, 128, 96);
    ScheduleOptions shaped = defaultSchedule(large, 1, 132);
    ScheduleOptions plain = defaultSchedule(large);
    EXPECT_EQ(shaped.tileV, plain.tileV);
    EXPECT_EQ(shaped.chunkSize, plain.chunkSize);
    EXPECT_EQ(shaped.strategy, plain.strategy);
  }
}

} // namespace

namespace {

/// Equality of the knobs a default sets.
void expectSameSchedule(const ScheduleOptions &a, const ScheduleOptions &b) {
  EXPECT_EQ(a.chunkSize, b.chunkSize);
  EXPECT_EQ(a.tileV, b.tileV);
  EXPECT_EQ(a.warps, b.warps);
  EXPECT_EQ(a.strategy, b.strategy);
  EXPECT_EQ(a.prefetch, b.prefetch);
  EXPECT_EQ(a.segments, b.segments);
  EXPECT_EQ(a.warpgroup, b.warpgroup);
}

// The kernel is planned for the spec lina-specialize makes, so the default
// is chosen for that spec: KDA written as its DPLR equivalent (the vectors
// tied to k) gets KDA's schedule, the wgmma scan on Hopper included, and
// planning it with that schedule is not refused.
TEST(DefaultSchedule, EquivalentSpecsGetTheSameSchedule) {
  Spec kda = preset("kda", 128, 16);
  Spec dplr = kda;
  dplr.update = UpdateRule::DPLR;
  dplr.lowRankA = LowRankSource::NegDecayedKey;
  dplr.lowRankB = LowRankSource::BetaKey;
  dplr.write = WriteWeight::Beta;
  ASSERT_TRUE(validate(dplr).empty()) << validate(dplr).front();
  EXPECT_EQ(specializedSpec(dplr).update, UpdateRule::Delta);
  for (int64_t sequences : {1, 4, 8}) {
    SCOPED_TRACE(sequences);
    ScheduleOptions asKda = defaultSchedule(kda, sequences, 132, 8192, "sm_90");
    ScheduleOptions asDplr =
        defaultSchedule(dplr, sequences, 132, 8192, "sm_90");
    expectSameSchedule(asDplr, asKda);
    EXPECT_TRUE(asDplr.warpgroup);
    Expected<KernelPlan> plan = planChunkKernel(dplr, asDplr);
    ASSERT_TRUE(plan.ok()) << plan.message();
    EXPECT_TRUE(plan->needsSm90a);
    EXPECT_EQ(plan->spec.update, UpdateRule::Delta);
  }
  expectSameSchedule(defaultSchedule(dplr), defaultSchedule(kda));
}

} // namespace
