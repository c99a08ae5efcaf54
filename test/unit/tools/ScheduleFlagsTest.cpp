//===- ScheduleFlagsTest.cpp - The schedule flags of lina compile/run ----===//
//
// Part of lina. `lina run --device gpu` uses the schedule from the flags when
// any schedule flag is given, else the tuned or default one. Until this test,
// --prefetch, --no-prefetch and --shared-state alone were silently ignored
// there (only --chunk-size, --tile-v, --warps and --strategy counted).
//
//===----------------------------------------------------------------------===//
#include "ScheduleOptions.h"
#include "lina/Autotune/ScheduleKnobs.h"
#include "lina/Codegen/KernelPlanner.h"
#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

using namespace lina;
using namespace lina::cli;

namespace {

ArgParser parsed(const std::vector<std::string> &args) {
  ArgParser p("run", "", "");
  addScheduleOptions(p);
  EXPECT_TRUE(p.parse(args));
  return p;
}

TEST(ScheduleFlags, EachFlagAloneCounts) {
  for (std::vector<std::string> args :
       {std::vector<std::string>{"--chunk-size", "32"},
        {"--tile-v", "64"},
        {"--warps", "4"},
        {"--strategy", "fused"},
        {"--prefetch"},
        {"--no-prefetch"},
        {"--shared-state"},
        {"--direct-decay"},
        {"--two-ctas"}}) {
    SCOPED_TRACE(args.front());
    EXPECT_TRUE(scheduleFlagGiven(parsed(args)));
  }
  EXPECT_FALSE(scheduleFlagGiven(parsed({})));
}

TEST(ScheduleFlags, FlagsChangeTheDefault) {
  Spec spec = findPreset("gdn")->spec;
  ScheduleOptions fallback = defaultSchedule(spec);
  ASSERT_TRUE(fallback.prefetch);
  ASSERT_FALSE(fallback.sharedState);
  EXPECT_FALSE(scheduleFromOptions(parsed({"--no-prefetch"}), spec).prefetch);
  EXPECT_TRUE(
      scheduleFromOptions(parsed({"--shared-state"}), spec).sharedState);
  ScheduleOptions plain = scheduleFromOptions(parsed({}), spec);
  EXPECT_EQ(plain.prefetch, fallback.prefetch);
  EXPECT_EQ(plain.tileV, fallback.tileV);
  EXPECT_THROW(
      scheduleFromOptions(parsed({"--prefetch", "--no-prefetch"}), spec),
      UsageError);
}

// Every flag the cache and the tuner name (scheduleFlags) is a flag of the
// command line, which sets it and nothing else: the parser answers "not
// given" for a name it does not declare, so a flag missing from
// addScheduleOptions would be dropped without a word.
TEST(ScheduleFlags, EveryScheduleFlagIsDeclaredAndSetsItsField) {
  Spec spec = findPreset("gdn")->spec;
  ScheduleOptions fallback = defaultSchedule(spec);
  for (const ScheduleKnob &flag : scheduleFlags()) {
    SCOPED_TRACE(flag.name);
    // --mma warpgroup sets it, and brings its layout as well
    // (MmaWarpgroupBringsItsLayout).
    if (std::string(flag.name) == "warpgroup")
      continue;
    ArgParser p = parsed({std::string("--") + flag.name});
    EXPECT_TRUE(scheduleFlagGiven(p));
    ScheduleOptions s = applyScheduleFlags(p, fallback, spec);
    EXPECT_EQ(flag.get(s), 1);
    flag.set(s, flag.get(fallback));
    EXPECT_EQ(describe(s), describe(fallback));
  }
}

// On the GPU the flags apply to the loader's default for the shape: a knob
// given changes that knob, and the grid's 64-column tiles stay. (They once
// applied to the spec's default, so `--chunk-size 32` also moved tile-v from
// 64 back to 32.) 80 heads: kda's grid default is tv64 there.
TEST(ScheduleFlags, OneFlagChangesOneKnobOfTheShapeDefault) {
  Spec spec = findPreset("kda")->spec;
  spec.keyDim = spec.valueDim = 128;
  spec.valueHeads = spec.heads = 80;
  ScheduleOptions grid = defaultSchedule(spec, /*sequences=*/1, /*SMs=*/132);
  ASSERT_EQ(grid.tileV, 64);
  ASSERT_NE(grid.tileV, defaultSchedule(spec).tileV);
  ScheduleOptions s = applyScheduleFlags(parsed({"--chunk-size", "32"}), grid, spec);
  EXPECT_EQ(s.chunkSize, 32);
  EXPECT_EQ(s.tileV, 64);
  EXPECT_EQ(s.warps, grid.warps);
  EXPECT_EQ(s.strategy, grid.strategy);
  EXPECT_EQ(s.prefetch, grid.prefetch);
  ScheduleOptions shared = grid;
  shared.sharedState = true;
  EXPECT_TRUE(applyScheduleFlags(parsed({"--warps", "4"}), shared, spec).sharedState);
}

// The shape's default asks for two CTAs an SM for the delta rules' whole
// heads where they outnumber the SMs; --no-two-ctas takes that back, and
// contradicting flags are an error.
TEST(ScheduleFlags, NoTwoCTAsTurnsOffTheDefaults) {
  Spec spec = findPreset("gdn")->spec;
  spec.keyDim = spec.valueDim = 128;
  spec.valueHeads = spec.heads = 64;
  ScheduleOptions grid = defaultSchedule(spec, /*sequences=*/4, /*SMs=*/132);
  ASSERT_TRUE(grid.twoCTAs);
  ArgParser off = parsed({"--no-two-ctas"});
  EXPECT_TRUE(scheduleFlagGiven(off));
  ScheduleOptions s = applyScheduleFlags(off, grid, spec);
  EXPECT_FALSE(s.twoCTAs);
  s.twoCTAs = true;
  EXPECT_EQ(describe(s), describe(grid));
  EXPECT_THROW(
      applyScheduleFlags(parsed({"--two-ctas", "--no-two-ctas"}), grid, spec),
      UsageError);
}

// --mma warpgroup brings the warpgroup scan's one layout; a layout asked
// for without it sets aside a default's warpgroup scan (back to the split
// strategy and its chunk).
TEST(ScheduleFlags, MmaWarpgroupBringsItsLayout) {
  Spec spec = findPreset("mamba2")->spec;
  spec.keyDim = spec.valueDim = 128;
  spec.valueHeads = spec.heads = 96;
  ScheduleOptions split = defaultSchedule(spec, 1, 132, 8192);
  ASSERT_FALSE(split.warpgroup);
  ArgParser on = parsed({"--mma", "warpgroup"});
  EXPECT_TRUE(scheduleFlagGiven(on));
  ScheduleOptions s = applyScheduleFlags(on, split, spec);
  EXPECT_TRUE(s.warpgroup);
  EXPECT_EQ(s.strategy, Strategy::FusedScan);
  EXPECT_EQ(s.chunkSize, 64);
  EXPECT_EQ(s.tileV, 128);
  EXPECT_EQ(s.warps, 8);
  EXPECT_TRUE(planChunkKernel(spec, s).ok());

  ScheduleOptions hopper = defaultSchedule(spec, 1, 132, 8192, "sm_90");
  ASSERT_TRUE(hopper.warpgroup);
  ScheduleOptions chunk16 =
      applyScheduleFlags(parsed({"--chunk-size", "16"}), hopper, spec);
  EXPECT_FALSE(chunk16.warpgroup);
  EXPECT_EQ(chunk16.strategy, Strategy::Split);
  EXPECT_EQ(chunk16.chunkSize, 16);
  EXPECT_TRUE(planChunkKernel(spec, chunk16).ok());
  ScheduleOptions off =
      applyScheduleFlags(parsed({"--mma", "warp"}), hopper, spec);
  EXPECT_FALSE(off.warpgroup);
  EXPECT_EQ(off.strategy, Strategy::Split);
  EXPECT_EQ(off.chunkSize, 16);
  // Segments keep the warpgroup scan: it runs pieces itself.
  ScheduleOptions pieces =
      applyScheduleFlags(parsed({"--segments", "2"}), hopper, spec);
  EXPECT_TRUE(pieces.warpgroup);
  EXPECT_EQ(pieces.segments, 2);
  EXPECT_TRUE(planChunkKernel(spec, pieces).ok());
  // Asked for together, the layout wins and the planner names the clash.
  ScheduleOptions both = applyScheduleFlags(
      parsed({"--mma", "warpgroup", "--chunk-size", "16"}), hopper, spec);
  EXPECT_TRUE(both.warpgroup);
  Expected<KernelPlan> refused = planChunkKernel(spec, both);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("chunk size 64"), std::string::npos)
      << refused.message();
}

// GLA's warpgroup scan runs sequences whole: --mma warpgroup on a default with
// segments (few long sequences) drops them, and --segments asked for with
// it is the planner's refusal, named.
TEST(ScheduleFlags, MmaWarpgroupRunsGlaWhole) {
  Spec spec = findPreset("gla")->spec;
  spec.keyDim = spec.valueDim = 128;
  spec.valueHeads = spec.heads = 16;
  ScheduleOptions few = defaultSchedule(spec, 2, 132, 16384, "sm_90");
  ASSERT_GT(few.segments, 1);
  ScheduleOptions whole =
      applyScheduleFlags(parsed({"--mma", "warpgroup"}), few, spec);
  EXPECT_TRUE(whole.warpgroup);
  EXPECT_EQ(whole.segments, 1);
  EXPECT_TRUE(planChunkKernel(spec, whole).ok());
  ScheduleOptions pieces = applyScheduleFlags(
      parsed({"--mma", "warpgroup", "--segments", "4"}), few, spec);
  EXPECT_EQ(pieces.segments, 4);
  Expected<KernelPlan> refused = planChunkKernel(spec, pieces);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("segments"), std::string::npos)
      << refused.message();
}

// --mma takes warp or warpgroup, and names them when given anything else.
TEST(ScheduleFlags, MmaNamesItsValues) {
  Spec spec = findPreset("gdn")->spec;
  EXPECT_TRUE(scheduleFlagGiven(parsed({"--mma", "warp"})));
  try {
    scheduleFromOptions(parsed({"--mma", "wgmma"}), spec);
    ADD_FAILURE() << "--mma wgmma was accepted";
  } catch (const UsageError &e) {
    EXPECT_STREQ(e.what(), "--mma must be warp or warpgroup, got 'wgmma'");
  }
}

// The deprecated --wgmma and --no-wgmma mean --mma warpgroup and --mma
// warp, with one warning on stderr however often the flags are read.
TEST(ScheduleFlags, DeprecatedWgmmaFlagsMeanMma) {
  Spec spec = findPreset("mamba2")->spec;
  spec.keyDim = spec.valueDim = 128;
  spec.valueHeads = spec.heads = 96;
  ScheduleOptions split = defaultSchedule(spec, 1, 132, 8192);
  ScheduleOptions hopper = defaultSchedule(spec, 1, 132, 8192, "sm_90");
  for (const auto &[old, mma] :
       {std::pair<std::string, std::string>{"--wgmma", "warpgroup"},
        {"--no-wgmma", "warp"}}) {
    SCOPED_TRACE(old);
    ArgParser deprecated = parsed({old});
    EXPECT_TRUE(scheduleFlagGiven(deprecated));
    ArgParser current = parsed({"--mma", mma});
    for (const ScheduleOptions &base : {split, hopper}) {
      ScheduleOptions a = applyScheduleFlags(current, base, spec);
      testing::internal::CaptureStderr();
      ScheduleOptions b = applyScheduleFlags(deprecated, base, spec);
      std::string warning = testing::internal::GetCapturedStderr();
      EXPECT_EQ(describe(a), describe(b));
      EXPECT_TRUE(warning.empty() ||
                  warning == "lina: warning: " + old +
                                 " is deprecated; use --mma " + mma + "\n")
          << warning;
    }
    EXPECT_THROW(scheduleFromOptions(parsed({old, "--mma", mma}), spec),
                 UsageError);
  }
  EXPECT_THROW(scheduleFromOptions(parsed({"--wgmma", "--no-wgmma"}), spec),
               UsageError);
}

} // namespace
