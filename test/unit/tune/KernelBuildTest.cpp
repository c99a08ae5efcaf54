//===- KernelBuildTest.cpp - The warm start without a GPU --------------===//
//
// Part of lina. The code generator and NVRTC are replaced by counting fakes:
// a cold cache calls each once and stores the image; a warm cache (the same
// file opened again, as a fresh process would) calls neither and returns the
// same launch facts and cubin. Anything in the key that differs is a miss.
//
//===----------------------------------------------------------------------===//
#include "TuneTestUtil.h"

#include "lina/Autotune/KernelBuild.h"
#include "lina/Autotune/KernelImage.h"

#include <gtest/gtest.h>

namespace lina {
namespace {

using tunetest::quiet;
using tunetest::TempDir;
using tunetest::testSpec;

struct CountingSteps {
  int plans = 0, compiles = 0;
  bool failCompile = false;

  BuildSteps steps() {
    BuildSteps s;
    s.plan = [this](const Spec &spec,
                    const ScheduleOptions &o) -> Expected<KernelPlan> {
      ++plans;
      KernelPlan p;
      p.spec = spec;
      p.strategy = o.strategy;
      p.chunkSize = o.chunkSize;
      p.tileV = o.tileV;
      p.threads = o.warps * 32;
      p.source = "// source for C" + std::to_string(o.chunkSize);
      p.scanKernel = "lina_scan";
      p.scanSharedBytes = 1000 + unsigned(o.chunkSize);
      if (o.strategy == Strategy::Materialize) {
        p.outputKernel = "lina_output";
        p.outputSharedBytes = 777;
      }
      return p;
    };
    s.compile = [this](const KernelPlan &p,
                       const std::string &arch) -> Expected<std::string> {
      ++compiles;
      if (failCompile)
        return Status::error(StatusCode::CompileError, "nvrtc said no");
      // Binary bytes, NULs included, as a cubin has.
      return std::string("\x7f"
                         "ELF\0\1",
                         6) +
             arch + p.source;
    };
    return s;
  }
};

const BuildTarget kH200{"sm_90", "13.0"};

TEST(KernelImage, RoundTripsLaunchFacts) {
  KernelPlan p;
  p.spec = testSpec();
  p.strategy = Strategy::Materialize;
  p.chunkSize = 32;
  p.tileV = 16;
  p.threads = 256;
  p.scanKernel = "scan";
  p.scanSharedBytes = 12345;
  p.outputKernel = "out";
  p.outputSharedBytes = 678;
  std::string cubin("\0\1\2\n\nbinary", 11);
  std::optional<DecodedImage> d =
      decodeKernelImage(encodeKernelImage(p, cubin), testSpec());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->cubin, cubin);
  EXPECT_EQ(d->plan.strategy, Strategy::Materialize);
  EXPECT_EQ(d->plan.chunkSize, 32);
  EXPECT_EQ(d->plan.tileV, 16);
  EXPECT_EQ(d->plan.threads, 256);
  EXPECT_EQ(d->plan.scanKernel, "scan");
  EXPECT_EQ(d->plan.scanSharedBytes, 12345u);
  EXPECT_EQ(d->plan.outputKernel, "out");
  EXPECT_EQ(d->plan.outputSharedBytes, 678u);
  EXPECT_TRUE(d->plan.source.empty());
  EXPECT_FALSE(d->plan.needsSm90a);
  // The wgmma scan's launch reads it (its TMA descriptors follow Params).
  p.needsSm90a = true;
  d = decodeKernelImage(encodeKernelImage(p, cubin), testSpec());
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->plan.needsSm90a);
}

TEST(KernelImage, RefusesWhatItDidNotWrite) {
  KernelPlan p;
  p.scanKernel = "scan";
  std::string good = encodeKernelImage(p, "cubin");
  EXPECT_TRUE(decodeKernelImage(good, testSpec()));
  EXPECT_FALSE(decodeKernelImage("", testSpec()));
  EXPECT_FALSE(decodeKernelImage("just a cubin", testSpec()));
  // Truncated cubin: the byte count no longer matches.
  EXPECT_FALSE(decodeKernelImage(good.substr(0, good.size() - 1), testSpec()));
  std::string bad = good;
  bad.replace(bad.find("threads=128"), 11, "threads=abc");
  EXPECT_FALSE(decodeKernelImage(bad, testSpec()));
  KernelPlan m = p;
  m.strategy = Strategy::Materialize; // without an output kernel name
  EXPECT_FALSE(decodeKernelImage(encodeKernelImage(m, "x"), testSpec()));
}

TEST(KernelBuild, AHitIsPlannedForTheSpecializedSpecAsAMissIs) {
  // A stand-in for lina-specialize: the kernel's spec differs from the
  // caller's (as a dplr spec with a zero low-rank term becomes additive).
  auto specialize = [](const Spec &s) {
    Spec out = s;
    out.update = UpdateRule::Additive;
    return out;
  };
  Spec written = testSpec();
  written.update = UpdateRule::DPLR;
  TempDir dir;
  std::string path = dir.file("lina.db");
  CountingSteps counts;
  BuildSteps steps = counts.steps();
  steps.specialize = specialize;
  BuildSteps planned = steps;
  planned.plan = [&](const Spec &spec, const ScheduleOptions &o) {
    Expected<KernelPlan> p = steps.plan(specialize(spec), o);
    p->written = spec;
    return p;
  };
  ScheduleOptions o;
  o.chunkSize = 32;
  cache::Cache cache = cache::Cache::open(path, quiet());
  for (bool hit : {false, true}) {
    Expected<BuiltImage> b =
        buildKernelImage(&cache, written, o, kH200, planned);
    ASSERT_TRUE(b.ok()) << b.message();
    EXPECT_EQ(b->cacheHit, hit);
    EXPECT_EQ(b->plan.spec.update, UpdateRule::Additive) << "hit " << hit;
    ASSERT_TRUE(b->plan.written) << "hit " << hit;
    EXPECT_EQ(b->plan.written->update, UpdateRule::DPLR) << "hit " << hit;
  }
}

TEST(KernelBuild, WarmHitCallsNeitherCodegenNorNvrtc) {
  TempDir dir;
  std::string path = dir.file("lina.db");
  CountingSteps counts;
  ScheduleOptions o;
  o.chunkSize = 32;
  {
    cache::Cache cold = cache::Cache::open(path, quiet());
    Expected<BuiltImage> b =
        buildKernelImage(&cold, testSpec(), o, kH200, counts.steps());
    ASSERT_TRUE(b.ok()) << b.message();
    EXPECT_FALSE(b->cacheHit);
    EXPECT_EQ(counts.plans, 1);
    EXPECT_EQ(counts.compiles, 1);
  }
  // A new connection to the same file: what a fresh process sees.
  cache::Cache warm = cache::Cache::open(path, quiet());
  Expected<BuiltImage> b =
      buildKernelImage(&warm, testSpec(), o, kH200, counts.steps());
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_TRUE(b->cacheHit);
  EXPECT_EQ(counts.plans, 1) << "a warm hit ran the code generator";
  EXPECT_EQ(counts.compiles, 1) << "a warm hit ran NVRTC";
  EXPECT_EQ(b->plan.chunkSize, 32);
  EXPECT_EQ(b->plan.threads, 128);
  EXPECT_EQ(b->plan.scanKernel, "lina_scan");
  EXPECT_EQ(b->plan.scanSharedBytes, 1032u);
  EXPECT_EQ(b->cubin, std::string("\x7f"
                                  "ELF\0\1",
                                  6) +
                          "sm_90" + "// source for C32");
  EXPECT_EQ(b->plan.spec.name, "gdn");
  // What `lina cache list` says the cubin is for.
  std::vector<cache::CacheEntry> entries = warm.listEntries();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].specName, "gdn");
  EXPECT_EQ(entries[0].arch, "sm_90");
}

TEST(KernelBuild, EveryPartOfTheKeyMatters) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  CountingSteps counts;
  ScheduleOptions o;
  Spec spec = testSpec();
  ASSERT_TRUE(buildKernelImage(&db, spec, o, kH200, counts.steps()).ok());
  int expected = 1;
  auto missWith = [&](const Spec &s, const ScheduleOptions &so,
                      const BuildTarget &t) {
    Expected<BuiltImage> b = buildKernelImage(&db, s, so, t, counts.steps());
    EXPECT_TRUE(b.ok());
    EXPECT_FALSE(b->cacheHit);
    EXPECT_EQ(counts.compiles, ++expected);
  };
  missWith(spec, o, {"sm_80", "13.0"});
  missWith(spec, o, {"sm_90", "12.4"});
  // Every field of the schedule, flags included: a flag left out of the key
  // once made --shared-state load the register-state cubin.
  for (int field = 0; field < 9; ++field) {
    ScheduleOptions other = o;
    if (field == 0)
      other.chunkSize = 32;
    if (field == 1)
      other.tileV = 32;
    if (field == 2)
      other.warps = 8;
    if (field == 3)
      other.strategy = Strategy::Materialize;
    if (field == 4)
      other.prefetch = true;
    if (field == 5)
      other.sharedState = true;
    if (field == 6)
      other.directDecay = true;
    if (field == 7)
      other.twoCTAs = true;
    if (field == 8) // a cubin without the segment kernels once stood in
      other.segments = 4;
    missWith(spec, other, kH200);
  }
  Spec heads = spec;
  heads.valueHeads = 16;
  missWith(heads, o, kH200);
  Spec dtype = spec;
  dtype.dtype = DType::F32;
  missWith(dtype, o, kH200);
  // The name never reaches the source: a renamed spec shares the cubin.
  Spec renamed = spec;
  renamed.name = "my_gdn";
  Expected<BuiltImage> b =
      buildKernelImage(&db, renamed, o, kH200, counts.steps());
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->cacheHit);
  EXPECT_EQ(b->plan.spec.name, "my_gdn");
  EXPECT_EQ(counts.compiles, expected);
}

TEST(KernelBuild, DamagedImageIsRebuiltAndReplaced) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  CountingSteps counts;
  ScheduleOptions o;
  std::string key = kernelImageKey(testSpec(), o, kH200);
  ASSERT_TRUE(db.putCubin(key, "not an image"));
  Expected<BuiltImage> b =
      buildKernelImage(&db, testSpec(), o, kH200, counts.steps());
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->cacheHit);
  EXPECT_EQ(counts.compiles, 1);
  b = buildKernelImage(&db, testSpec(), o, kH200, counts.steps());
  EXPECT_TRUE(b->cacheHit);
  EXPECT_EQ(counts.compiles, 1);
}

TEST(KernelBuild, FailedCompileIsReturnedAndNotStored) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  CountingSteps counts;
  counts.failCompile = true;
  Expected<BuiltImage> b =
      buildKernelImage(&db, testSpec(), {}, kH200, counts.steps());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::CompileError);
  EXPECT_TRUE(db.listEntries().empty());
}

TEST(KernelBuild, NoCacheAlwaysBuilds) {
  CountingSteps counts;
  for (int i = 0; i < 2; ++i)
    ASSERT_TRUE(
        buildKernelImage(nullptr, testSpec(), {}, kH200, counts.steps()).ok());
  EXPECT_EQ(counts.compiles, 2);
}

TEST(KernelBuild, KeyIncludesTheGeneratorFingerprint) {
  std::string fp = codegenFingerprint();
  EXPECT_EQ(fp.size(), 64u) << fp;
}

} // namespace
} // namespace lina
