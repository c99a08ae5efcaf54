//===- BackwardLoaderTest.cpp - The backward's warm start, no GPU -------===//
//
// Part of lina. A backward plan's cubin goes through the cubin cache as the
// decode kernels' does (SourceImage.h): a cold cache compiles once and
// stores it, the same file opened again (as a fresh process would) hands
// back the same bytes without compiling, and the key follows the source,
// the arch and NVRTC's version. Then the real planner and NVRTC (sm_90,
// skipped without NVRTC), and the loader's error without a GPU.
//
//===----------------------------------------------------------------------===//
#include "TuneTestUtil.h"

#include "lina/Autotune/BackwardLoader.h"
#include "lina/Autotune/KernelLoader.h"
#include "lina/Codegen/KernelPlanner.h"
#include "lina/Runtime/Device.h"
#include "lina/Runtime/Nvrtc.h"
#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

namespace lina {
namespace {

BackwardPlan fakePlan(const std::string &source) {
  BackwardPlan plan;
  plan.source = source;
  return plan;
}

using CountingCompile = tunetest::CountingCompile<BackwardPlan>;

TEST(BackwardLoader, ColdCompilesAndStoresWarmReadsWithoutCompiling) {
  tunetest::TempDir dir;
  BuildTarget target{"sm_90", "13.0"};
  BackwardPlan plan = fakePlan("// backward source");
  CountingCompile compile;
  std::string cold;
  {
    cache::Cache db =
        cache::Cache::open(dir.file("lina.db"), tunetest::quiet());
    Expected<SourceImage> image =
        buildBackwardImage(&db, plan, target, compile.fn());
    ASSERT_TRUE(image.ok()) << image.message();
    EXPECT_FALSE(image->cacheHit);
    cold = image->cubin;
  }
  cache::Cache db = cache::Cache::open(dir.file("lina.db"), tunetest::quiet());
  Expected<SourceImage> warm =
      buildBackwardImage(&db, plan, target, compile.fn());
  ASSERT_TRUE(warm.ok()) << warm.message();
  EXPECT_TRUE(warm->cacheHit);
  EXPECT_EQ(compile.calls, 1);
  EXPECT_EQ(warm->cubin, cold);
}

TEST(BackwardLoader, KeyFollowsSourceArchAndNvrtc) {
  BuildTarget target{"sm_90", "13.0"};
  std::string key = backwardImageKey(fakePlan("a"), target);
  EXPECT_EQ(key, backwardImageKey(fakePlan("a"), target));
  EXPECT_NE(key, backwardImageKey(fakePlan("b"), target));
  EXPECT_NE(key, backwardImageKey(fakePlan("a"), {"sm_80", "13.0"}));
  EXPECT_NE(key, backwardImageKey(fakePlan("a"), {"sm_90", "12.8"}));
}

TEST(BackwardLoader, FailedCompileIsReturnedAndNotStored) {
  cache::Cache db = cache::Cache::openInMemory(tunetest::quiet());
  BuildTarget target{"sm_90", "13.0"};
  CountingCompile compile;
  compile.fail = true;
  Expected<SourceImage> image =
      buildBackwardImage(&db, fakePlan("x"), target, compile.fn());
  ASSERT_FALSE(image.ok());
  EXPECT_NE(image.message().find("nvrtc said no"), std::string::npos);
  compile.fail = false;
  image = buildBackwardImage(&db, fakePlan("x"), target, compile.fn());
  ASSERT_TRUE(image.ok());
  EXPECT_FALSE(image->cacheHit);
  EXPECT_EQ(compile.calls, 2);
}

TEST(BackwardLoader, RealPlanIsCompiledOnceThenRead) {
  if (!cuda::Nvrtc::get().available())
    GTEST_SKIP() << "NVRTC not found: "
                 << cuda::Nvrtc::get().status().message();
  Spec spec = findPreset("gdn")->spec;
  spec.keyDim = spec.valueDim = 64;
  spec.heads = spec.valueHeads = 2;
  Expected<BackwardPlan> plan = planBackwardKernel(spec, {});
  ASSERT_TRUE(plan.ok()) << plan.message();
  cache::Cache db = cache::Cache::openInMemory(tunetest::quiet());
  BuildTarget target{"sm_90", nvrtcVersionString()};
  int compiles = 0;
  BackwardCompileFn counted = [&](const BackwardPlan &p,
                                  const std::string &arch) {
    ++compiles;
    return compileBackwardPlan(p, arch);
  };
  Expected<SourceImage> cold = buildBackwardImage(&db, *plan, target, counted);
  ASSERT_TRUE(cold.ok()) << cold.message();
  EXPECT_EQ(cold->cubin.compare(0, 4,
                                "\x7f"
                                "ELF"),
            0);
  Expected<SourceImage> warm = buildBackwardImage(&db, *plan, target, counted);
  ASSERT_TRUE(warm.ok()) << warm.message();
  EXPECT_TRUE(warm->cacheHit);
  EXPECT_EQ(compiles, 1);
  EXPECT_EQ(warm->cubin, cold->cubin);
}

TEST(BackwardLoader, NoGpuIsTheDriversError) {
  if (cuda::queryDevice(0).ok())
    GTEST_SKIP() << "a GPU is present";
  Expected<BackwardPlan> plan =
      planBackwardKernel(findPreset("gdn")->spec, {});
  ASSERT_TRUE(plan.ok()) << plan.message();
  Expected<BackwardKernel> kernel = loadBackwardKernel(*plan);
  ASSERT_FALSE(kernel.ok());
  EXPECT_EQ(kernel.status().code(), cuda::queryDevice(0).status().code());
}

} // namespace
} // namespace lina
