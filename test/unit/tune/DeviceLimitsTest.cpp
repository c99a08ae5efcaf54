//===- DeviceLimitsTest.cpp - Occupancy and launch limits --------------===//
//
// Part of lina. Values worked by hand from CUDA's occupancy rules for an
// H100/H200 (the DeviceLimits defaults).
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/DeviceLimits.h"
#include "lina/Autotune/CostModel.h"
#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

namespace lina {
namespace {

TEST(DeviceLimits, ThreadsBound) {
  DeviceLimits h200;
  // 128 threads, few registers, no shared memory: 2048 / 128 = 16 CTAs.
  EXPECT_EQ(blocksPerSM(h200, 128, 32, 0), 16);
  // 32 threads: the 32-blocks-per-SM limit, not 64.
  EXPECT_EQ(blocksPerSM(h200, 32, 32, 0), 32);
}

TEST(DeviceLimits, RegistersBound) {
  DeviceLimits h200;
  // 64 registers x 32 lanes = 2048 per warp, 4 warps = 8192: 8 CTAs.
  EXPECT_EQ(blocksPerSM(h200, 128, 64, 0), 8);
  // 100 registers round up to 3328 per warp (13 x 256), 8 warps = 26624:
  // 65536 / 26624 = 2.
  EXPECT_EQ(blocksPerSM(h200, 256, 100, 0), 2);
}

TEST(DeviceLimits, SharedMemoryBound) {
  DeviceLimits h200;
  // 100 KiB + 1 KiB reserved each: two fit in 228 KiB.
  EXPECT_EQ(blocksPerSM(h200, 128, 32, 100 * 1024), 2);
  EXPECT_EQ(blocksPerSM(h200, 128, 32, 200 * 1024), 1);
  EXPECT_EQ(blocksPerSM(h200, 128, 32, 232449), 0);
}

TEST(DeviceLimits, LaunchProblems) {
  DeviceLimits h200;
  EXPECT_EQ(launchLimitProblem(h200, 256, 128, 64 * 1024), "");
  // 255 registers x 1024 threads: 262144 > 65536 per block.
  std::string p = launchLimitProblem(h200, 1024, 255, 0);
  EXPECT_NE(p.find("registers per thread"), std::string::npos) << p;
  EXPECT_NE(launchLimitProblem(h200, 2048, 32, 0), "");
}

TEST(CostModel, DeterministicAndMonotoneInWork) {
  Spec s;
  s.keyDim = s.valueDim = 128;
  s.heads = s.valueHeads = 8;
  ScheduleOptions o;
  DeviceLimits h200;
  double a = modelMilliseconds(s, o, 1, 4096, h200, 40000, 128);
  EXPECT_EQ(a, modelMilliseconds(s, o, 1, 4096, h200, 40000, 128));
  EXPECT_GT(a, 0);
  EXPECT_GT(modelMilliseconds(s, o, 1, 16384, h200, 40000, 128), a);
  EXPECT_GT(modelMilliseconds(s, o, 64, 4096, h200, 40000, 128), a);
}

// Segments count where the runtime would run them (split strategy, a rule
// that can): few long sequences in pieces are more CTAs with fewer chunks
// each, so the model finds them faster there; elsewhere they change nothing.
TEST(CostModel, SegmentsWhereTheRuntimeRunsThem) {
  DeviceLimits h200;
  ScheduleOptions whole;
  whole.strategy = Strategy::Split;
  whole.tileV = 128;
  whole.warps = 8;
  ScheduleOptions pieces = whole;
  pieces.segments = 8;
  auto ms = [&](const char *preset, const ScheduleOptions &o) {
    Spec spec = findPreset(preset)->spec;
    spec.keyDim = spec.valueDim = 128;
    spec.heads = spec.valueHeads = 16;
    return modelMilliseconds(spec, o, 2, 16384, h200, 40000, 256);
  };
  EXPECT_LT(ms("mamba2", pieces), ms("mamba2", whole));
  EXPECT_EQ(ms("gdn", pieces), ms("gdn", whole));
  ScheduleOptions fused = pieces, fusedWhole = whole;
  fused.strategy = fusedWhole.strategy = Strategy::FusedScan;
  EXPECT_EQ(ms("mamba2", fused), ms("mamba2", fusedWhole));
}

} // namespace
} // namespace lina
