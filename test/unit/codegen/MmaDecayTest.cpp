//===- MmaDecayTest.cpp - Per-channel decay products on tensor cores ----===//
//
// Part of lina. Per-channel decay products are factored onto the tensor
// cores by default and summed directly with the direct_decay flag: which
// decay products get the scratch that factored_decay_product needs, and
// that both kinds of kernel compile. The values are the GPU suite's to
// check (every per-channel case, and the "+direct" ones).
//
//===----------------------------------------------------------------------===//
#include "ExpectCubin.h"
#include "lina/Codegen/KernelPlanner.h"
#include "lina/Runtime/Nvrtc.h"
#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

#include <regex>

using namespace lina;

namespace {

/// The decay_product calls of a kernel source, and how many pass scratch
/// (an eighth argument after `strict`).
struct DecayCalls {
  int all = 0, factored = 0;
};

DecayCalls decayCalls(const std::string &source) {
  static const std::regex call(
      R"(    decay_product<[^>]*>\([^;]*, n, (true|false)(, \(smem \+ [0-9]+\))?\);)");
  DecayCalls calls;
  for (auto it = std::sregex_iterator(source.begin(), source.end(), call);
       it != std::sregex_iterator(); ++it) {
    ++calls.all;
    calls.factored += (*it)[2].matched;
  }
  return calls;
}

KernelPlan plan(const std::string &preset, Strategy strategy, bool factored,
                DType dtype = DType::BF16) {
  Spec spec = findPreset(preset)->spec;
  spec.dtype = dtype;
  ScheduleOptions schedule = defaultSchedule(spec);
  schedule.strategy = strategy;
  schedule.directDecay = !factored;
  Expected<KernelPlan> p = planChunkKernel(spec, schedule);
  EXPECT_TRUE(p.ok()) << p.message();
  return p.ok() ? std::move(p).value() : KernelPlan();
}

TEST(MmaDecay, PerChannelProductsGetScratchUnlessDirect) {
  for (const char *preset : {"kda", "gla", "rwkv7"})
    for (Strategy strategy : {Strategy::Split, Strategy::FusedScan}) {
      SCOPED_TRACE(std::string(preset) + " " + toString(strategy));
      DecayCalls with = decayCalls(plan(preset, strategy, true).source);
      DecayCalls without = decayCalls(plan(preset, strategy, false).source);
      EXPECT_GT(with.all, 0);
      EXPECT_EQ(with.factored, with.all);
      EXPECT_EQ(without.all, with.all);
      EXPECT_EQ(without.factored, 0);
    }
}

// Scalar gates already factor exactly (one exp per pair); fp32 inputs use
// FMA products. Neither changes with the flag.
TEST(MmaDecay, ScalarGatesAndF32AreUnchanged) {
  EXPECT_EQ(plan("gdn", Strategy::Split, true).source,
            plan("gdn", Strategy::Split, false).source);
  DecayCalls f32 =
      decayCalls(plan("kda", Strategy::Split, true, DType::F32).source);
  EXPECT_GT(f32.all, 0);
  EXPECT_EQ(f32.factored, 0);
}

TEST(MmaDecay, FactoredIsTheDefault) {
  Spec spec = findPreset("kda")->spec;
  Expected<KernelPlan> p = planChunkKernel(spec, defaultSchedule(spec));
  ASSERT_TRUE(p.ok()) << p.message();
  DecayCalls calls = decayCalls(p->source);
  EXPECT_GT(calls.all, 0);
  EXPECT_EQ(calls.factored, calls.all);
}

TEST(MmaDecay, FactoredAndDirectKernelsCompile) {
  const cuda::Nvrtc &nvrtc = cuda::Nvrtc::get();
  if (!nvrtc.available())
    GTEST_SKIP() << nvrtc.status().message();
  for (const char *preset : {"kda", "gla", "rwkv7"})
    for (Strategy strategy : {Strategy::Split, Strategy::FusedScan}) {
      SCOPED_TRACE(std::string(preset) + " " + toString(strategy));
      for (bool factored : {true, false})
        ASSERT_NO_FATAL_FAILURE(test::expectCubinForSm90(
            plan(preset, strategy, factored).source));
    }
}

} // namespace
