//===- FetchRingTest.cpp - How many buffers a scan's fetched tiles get ---===//
//
// Part of lina. A scan that prefetches copies each chunk's tiles into a
// ring of shared buffers (CudaEmitter's `fetched`): three, so the copies
// run two chunks ahead, where every tile goes by cp.async and the third
// buffers cost no CTA below 24 warps an SM; two where they would; one
// (through registers, with a barrier ending each chunk) where two would
// leave room for a single CTA an SM and one buffer for more. The GPU suite
// runs every kind; this pins which kernel gets which.
//
//===----------------------------------------------------------------------===//
#include "lina/Codegen/KernelPlanner.h"
#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

using namespace lina;

namespace {

std::string scanSource(const Spec &spec, const ScheduleOptions &schedule) {
  Expected<KernelPlan> plan = planChunkKernel(spec, schedule);
  EXPECT_TRUE(plan.ok()) << plan.message();
  if (!plan.ok())
    return "";
  size_t scan = plan->source.find(plan->scanKernel + "(lina::Params");
  return scan == std::string::npos ? "" : plan->source.substr(scan);
}

bool has(const std::string &text, const std::string &what) {
  return text.find(what) != std::string::npos;
}

// mamba2 and gla: every tile of the split scan is a packed bf16 or an fp32
// workspace tile, so three buffers (63 KB at tv64: three CTAs an SM). On the
// H200, 2x16384x16x128: mamba2 1.014 -> 0.809 ms, gla 1.176 -> 1.006 against
// two (docs/perf-notes.md).
TEST(FetchRing, AdditiveSplitScansCopyTwoChunksAhead) {
  for (const char *name : {"mamba2", "gla"}) {
    SCOPED_TRACE(name);
    Spec spec = findPreset(name)->spec;
    spec.keyDim = spec.valueDim = 128;
    std::string scan = scanSource(spec, defaultSchedule(spec));
    EXPECT_TRUE(has(scan, "Each fetched tile has 3 buffers")) << scan;
    EXPECT_TRUE(has(scan, "copies_landed<1>();\n    __syncthreads();\n"
                          "    if (t0 + 32 < end)"))
        << scan;
    EXPECT_FALSE(has(scan, "tile_fetch<")) << scan;
  }
}

// gdn's default where tv64 would give one or two CTAs an SM (tv32 on four
// warps, four CTAs an SM by its registers; 80 heads here, 96 before whole
// heads took that grid): a third buffer would leave room for three, and
// cost 1.351 -> 1.786 ms at 1x8192x96x128; rwkv7 (tv32 w8, three CTAs)
// 3.62 -> 4.27.
TEST(FetchRing, ThirdBuffersNeverCostTheOccupancyOfFourWarpCTAs) {
  Spec gdn = findPreset("gdn")->spec;
  gdn.keyDim = gdn.valueDim = 128;
  gdn.heads = gdn.valueHeads = 80;
  ScheduleOptions grid = defaultSchedule(gdn, /*sequences=*/1, /*SMs=*/132);
  ASSERT_EQ(grid.warps, 4);
  std::string scan = scanSource(gdn, grid);
  EXPECT_TRUE(has(scan, "Each fetched tile has 2 buffers")) << scan;
  EXPECT_TRUE(has(scan, "copies_landed<0>();")) << scan;

  Spec rwkv7 = findPreset("rwkv7")->spec;
  rwkv7.keyDim = rwkv7.valueDim = 128;
  scan = scanSource(rwkv7, defaultSchedule(rwkv7));
  EXPECT_TRUE(has(scan, "Each fetched tile has 2 buffers")) << scan;
}

// gla's materializing scan keeps fp32 tiles: two buffers would leave room for
// one CTA an SM, one buffer for two. It fetches through registers, commits
// at the chunk's top, and ends each chunk with a barrier.
TEST(FetchRing, SingleBuffersWhereTwoWouldCostTheSecondCTA) {
  Spec spec = findPreset("gla")->spec;
  ScheduleOptions schedule = defaultSchedule(spec);
  schedule.strategy = Strategy::Materialize;
  std::string scan = scanSource(spec, schedule);
  EXPECT_TRUE(has(scan, "Fetched into registers")) << scan;
  EXPECT_TRUE(has(scan, "fetched0.commit((smem + ")) << scan;
  EXPECT_FALSE(has(scan, "ring")) << scan;
  EXPECT_TRUE(has(scan, "    __syncthreads();\n  }\n")) << scan;
}

} // namespace
