//===- JitTest.cpp - The warm start with the real code generator -------===//
//
// Part of lina. The real steps (planChunkKernel and NVRTC, for sm_90 without
// a GPU) through the cubin cache: the cached image is a cubin with the
// planner's launch facts, and the second request runs neither step. Also the
// LINA_CACHE switch and the loader's errors on a machine without a GPU.
//
//===----------------------------------------------------------------------===//
#include "TuneTestUtil.h"

#include "lina/Autotune/KernelImage.h"
#include "lina/Autotune/KernelLoader.h"
#include "lina/Autotune/ScheduleKnobs.h"
#include "lina/Autotune/SearchSpace.h"
#include "lina/Runtime/Nvrtc.h"
#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <cstdlib>

namespace lina {
namespace {

Spec gdn() {
  Spec s = findPreset("gdn")->spec;
  s.keyDim = s.valueDim = 64;
  s.heads = s.valueHeads = 4;
  return s;
}

TEST(Jit, RealStepsAreCachedAndSkippedWhenWarm) {
  if (!cuda::Nvrtc::get().available())
    GTEST_SKIP() << "NVRTC not found: "
                 << cuda::Nvrtc::get().status().message();
  cache::Cache db = cache::Cache::openInMemory(tunetest::quiet());
  BuildSteps real = defaultBuildSteps();
  int plans = 0, compiles = 0;
  BuildSteps counted;
  counted.plan = [&](const Spec &s, const ScheduleOptions &o) {
    ++plans;
    return real.plan(s, o);
  };
  counted.compile = [&](const KernelPlan &p, const std::string &arch) {
    ++compiles;
    return real.compile(p, arch);
  };
  BuildTarget target{"sm_90", nvrtcVersionString()};
  for (Strategy strategy :
       {Strategy::FusedScan, Strategy::Materialize, Strategy::Split}) {
    ScheduleOptions o = defaultSchedule(gdn());
    o.strategy = strategy;
    Expected<BuiltImage> cold =
        buildKernelImage(&db, gdn(), o, target, counted);
    ASSERT_TRUE(cold.ok()) << cold.message();
    EXPECT_FALSE(cold->cacheHit);
    EXPECT_EQ(cold->cubin.compare(0, 4,
                                  "\x7f"
                                  "ELF"),
              0);
    int before = plans + compiles;
    Expected<BuiltImage> warm =
        buildKernelImage(&db, gdn(), o, target, counted);
    ASSERT_TRUE(warm.ok()) << warm.message();
    EXPECT_TRUE(warm->cacheHit);
    EXPECT_EQ(plans + compiles, before) << "a warm hit planned or compiled";
    EXPECT_EQ(warm->cubin, cold->cubin);
    const KernelPlan &a = cold->plan, &b = warm->plan;
    EXPECT_EQ(a.strategy, b.strategy);
    EXPECT_EQ(a.chunkSize, b.chunkSize);
    EXPECT_EQ(a.tileV, b.tileV);
    EXPECT_EQ(a.threads, b.threads);
    EXPECT_EQ(a.scanKernel, b.scanKernel);
    EXPECT_EQ(a.scanSharedBytes, b.scanSharedBytes);
    EXPECT_EQ(a.outputKernel, b.outputKernel);
    EXPECT_EQ(a.outputSharedBytes, b.outputSharedBytes);
    EXPECT_EQ(a.prepareKernel, b.prepareKernel);
    EXPECT_EQ(a.prepareSharedBytes, b.prepareSharedBytes);
    EXPECT_EQ(a.chunkDataFloats, b.chunkDataFloats);
  }
  EXPECT_EQ(plans, 3);
  EXPECT_EQ(compiles, 3);
}

TEST(Jit, CacheSwitch) {
  const char *old = std::getenv("LINA_CACHE");
  std::string saved = old ? old : "";
  for (const char *off : {"off", "OFF", "0", "no", "false"}) {
    setenv("LINA_CACHE", off, 1);
    EXPECT_FALSE(cacheEnabledByEnvironment()) << off;
  }
  for (const char *on : {"on", "1", "yes"}) {
    setenv("LINA_CACHE", on, 1);
    EXPECT_TRUE(cacheEnabledByEnvironment()) << on;
  }
  unsetenv("LINA_CACHE");
  EXPECT_TRUE(cacheEnabledByEnvironment());
  if (old)
    setenv("LINA_CACHE", saved.c_str(), 1);
}

TEST(Jit, WithoutAGpuTheLoaderSaysSoAndBadSchedulesComeFirst) {
  if (cuda::queryDevice(0).ok())
    GTEST_SKIP() << "a GPU is present";
  cache::Cache db = cache::Cache::openInMemory(tunetest::quiet());
  KernelRequest r;
  r.spec = gdn();
  r.batch = 1;
  r.seqLen = 4096;
  Expected<ChunkKernel> k = loadKernelWithCache(r, &db);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), StatusCode::NoDriver) << k.message();
  ScheduleOptions tooBig;
  tooBig.chunkSize = 128;
  tooBig.tileV = 64;
  tooBig.warps = 4;
  r.schedule = tooBig;
  r.spec.keyDim = r.spec.valueDim = 128;
  k = loadKernelWithCache(r, &db);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), StatusCode::InvalidArgument) << k.message();
  EXPECT_TRUE(db.listEntries().empty());
}

// Without a GPU (or without a shape) the base for partial schedules is the
// spec's default; the GPU path (the grid's default) is the suite's to run.
TEST(Jit, ShapeDefaultWithoutAGpuIsTheSpecDefault) {
  Spec spec = gdn();
  spec.keyDim = spec.valueDim = 128;
  EXPECT_TRUE(sameSchedule(shapeDefaultSchedule(spec, 0, 0),
                           defaultSchedule(spec)));
  if (cuda::queryDevice(0).ok())
    GTEST_SKIP() << "a GPU is present";
  EXPECT_TRUE(sameSchedule(shapeDefaultSchedule(spec, 1, 0),
                           defaultSchedule(spec)));
}

} // namespace
// The tuner's space holds the wgmma scan for a spec it covers once a layout
// (with prefetch: without it the kernel is the same) at each segment count
// the rule can run, whole heads and for the printed scans 64-column value
// tiles on whole sequences, and off sm_90 not at all, with the reason.
TEST(SearchSpace, HoldsTheWgmmaScanOnceAndOnlyOnSm90) {
  Spec spec = findPreset("mamba2")->spec;
  spec.keyDim = spec.valueDim = 128;
  DeviceLimits h200;
  std::vector<std::string> viable;
  for (const SpaceCandidate &c : enumerateCandidates(spec, h200))
    if (c.schedule.warpgroup && c.viable())
      viable.push_back(describe(c.schedule));
  ASSERT_EQ(viable.size(), 6u); // segments 1, 2, 4, 8, 16; value tiles
  EXPECT_NE(std::find(viable.begin(), viable.end(),
                      describe(withWarpgroup(ScheduleOptions()))),
            viable.end());
  ScheduleOptions tiles = withWarpgroup(ScheduleOptions());
  tiles.tileV = 64;
  tiles.warps = 4;
  EXPECT_NE(std::find(viable.begin(), viable.end(), describe(tiles)),
            viable.end())
      << describe(tiles);
  for (int64_t segments : {2, 4, 8, 16}) {
    ScheduleOptions pieces = withWarpgroup(ScheduleOptions());
    pieces.segments = segments;
    EXPECT_NE(std::find(viable.begin(), viable.end(), describe(pieces)),
              viable.end())
        << describe(pieces);
  }
  // The printed pairs of the delta rules and of GLA run no segments (GLA's
  // rule has a segments axis: pruned with the reason): whole heads, and a
  // 64-column tile on four warps or on eight.
  for (const char *name : {"gdn", "kda", "gla"}) {
    Spec d128 = findPreset(name)->spec;
    d128.keyDim = d128.valueDim = 128;
    size_t scans = 0;
    for (const SpaceCandidate &c : enumerateCandidates(d128, h200))
      scans += c.schedule.warpgroup && c.viable();
    EXPECT_EQ(scans, 3u) << name;
  }
  DeviceLimits ampere;
  ampere.arch = "sm_80";
  for (const SpaceCandidate &c : enumerateCandidates(spec, ampere))
    if (c.schedule.warpgroup) {
      ASSERT_FALSE(c.viable()) << describe(c.schedule);
      EXPECT_NE(c.pruned.find("sm_90"), std::string::npos) << c.pruned;
    }
  // A spec the scan does not cover (a DPLR b decayed by its own
  // per-channel gate) has no wgmma axis at all; rwkv7's has its 64-column
  // tile on four warps and on eight (its prepare kernel on both
  // warpgroups).
  Spec negDecayed = findPreset("rwkv7")->spec;
  negDecayed.lowRankB = LowRankSource::NegDecayedKey;
  for (const SpaceCandidate &c : enumerateCandidates(negDecayed, h200))
    ASSERT_FALSE(c.schedule.warpgroup);
  Spec rwkv7 = findPreset("rwkv7")->spec;
  rwkv7.keyDim = rwkv7.valueDim = 128;
  size_t rwkv7Scans = 0;
  for (const SpaceCandidate &c : enumerateCandidates(rwkv7, h200))
    rwkv7Scans += c.schedule.warpgroup && c.viable();
  EXPECT_EQ(rwkv7Scans, 2u);
}

} // namespace lina
