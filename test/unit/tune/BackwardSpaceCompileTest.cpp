//===- BackwardSpaceCompileTest.cpp - The backward's space compiles -----===//
//
// Part of lina. What the backward's search space calls viable must compile:
// a candidate the planner passes and NVRTC refuses would cost every tune a
// compile error. Each backward compile takes seconds, so this takes one
// viable candidate per chunk size of a small spec's space (the largest
// chunk holds the most shared memory the planner still allows); `lina tune
// --backward` on a GPU compiles the whole space of the shapes it tunes.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/BackwardSearchSpace.h"
#include "lina/Runtime/Nvrtc.h"
#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

#include <set>

namespace lina {
namespace {

TEST(BackwardSpace, OneCandidatePerChunkSizeCompiles) {
  if (!cuda::Nvrtc::get().available())
    GTEST_SKIP() << "NVRTC not found: "
                 << cuda::Nvrtc::get().status().message();
  Spec spec = findPreset("gla")->spec;
  spec.keyDim = spec.valueDim = 16;
  spec.heads = spec.valueHeads = 2;
  std::set<int64_t> chunks;
  for (const BackwardSpaceCandidate &c :
       enumerateBackwardCandidates(spec, DeviceLimits())) {
    if (!c.viable() || !chunks.insert(c.schedule.chunkSize).second)
      continue;
    SCOPED_TRACE(describe(c.schedule));
    Expected<BackwardPlan> plan = planBackwardKernel(spec, c.schedule);
    ASSERT_TRUE(plan.ok()) << plan.message();
    EXPECT_EQ(plan->chunkSize, c.schedule.chunkSize);
    EXPECT_EQ(plan->tileV, c.schedule.tileV);
    Expected<std::string> cubin = compileBackwardPlan(*plan, "sm_90");
    ASSERT_TRUE(cubin.ok()) << cubin.message();
  }
  // The default's chunk size at least is viable.
  EXPECT_EQ(chunks.count(defaultBackwardSchedule(spec).chunkSize), 1u);
}

} // namespace
} // namespace lina
