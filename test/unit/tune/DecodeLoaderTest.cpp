//===- DecodeLoaderTest.cpp - Decode kernels' warm start, no GPU ------===//
//
// Part of lina. A decode plan's cubin goes through the cubin cache: a cold
// cache compiles once and stores it; the same file opened again (as a fresh
// process would) hands back the same bytes without compiling. The key
// follows the source, the arch and NVRTC's version. Then the same with the
// real planner and NVRTC (for sm_90, skipped without NVRTC), and the
// loader's error on a machine without a GPU.
//
//===----------------------------------------------------------------------===//
#include "TuneTestUtil.h"

#include "lina/Autotune/DecodeLoader.h"
#include "lina/Autotune/KernelLoader.h"
#include "lina/Codegen/DecodePlanner.h"
#include "lina/Runtime/Device.h"
#include "lina/Runtime/Nvrtc.h"
#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

namespace lina {
namespace {

DecodePlan fakePlan(const std::string &source) {
  DecodePlan plan;
  plan.source = source;
  plan.warpColumns = {4, 8};
  plan.kernelNames = {"lina_decode_w4", "lina_decode_w8"};
  return plan;
}

using CountingCompile = tunetest::CountingCompile<DecodePlan>;

TEST(DecodeLoader, ColdCompilesAndStoresWarmReadsWithoutCompiling) {
  tunetest::TempDir dir;
  BuildTarget target{"sm_90", "13.0"};
  DecodePlan plan = fakePlan("// decode source");
  CountingCompile compile;
  std::string cold;
  {
    cache::Cache db =
        cache::Cache::open(dir.file("lina.db"), tunetest::quiet());
    Expected<DecodeImage> image =
        buildDecodeImage(&db, plan, target, compile.fn());
    ASSERT_TRUE(image.ok()) << image.message();
    EXPECT_FALSE(image->cacheHit);
    EXPECT_EQ(compile.calls, 1);
    cold = image->cubin;
  }
  cache::Cache db = cache::Cache::open(dir.file("lina.db"), tunetest::quiet());
  Expected<DecodeImage> warm =
      buildDecodeImage(&db, plan, target, compile.fn());
  ASSERT_TRUE(warm.ok()) << warm.message();
  EXPECT_TRUE(warm->cacheHit);
  EXPECT_EQ(compile.calls, 1);
  EXPECT_EQ(warm->cubin, cold);
}

TEST(DecodeLoader, KeyFollowsSourceArchAndNvrtc) {
  BuildTarget target{"sm_90", "13.0"};
  std::string key = decodeImageKey(fakePlan("a"), target);
  EXPECT_EQ(key, decodeImageKey(fakePlan("a"), target));
  EXPECT_NE(key, decodeImageKey(fakePlan("b"), target));
  EXPECT_NE(key, decodeImageKey(fakePlan("a"), {"sm_80", "13.0"}));
  EXPECT_NE(key, decodeImageKey(fakePlan("a"), {"sm_90", "12.8"}));

  cache::Cache db = cache::Cache::openInMemory(tunetest::quiet());
  CountingCompile compile;
  ASSERT_TRUE(buildDecodeImage(&db, fakePlan("a"), target, compile.fn()).ok());
  ASSERT_TRUE(buildDecodeImage(&db, fakePlan("b"), target, compile.fn()).ok());
  EXPECT_EQ(compile.calls, 2);
}

TEST(DecodeLoader, FailedCompileIsReturnedAndNotStored) {
  cache::Cache db = cache::Cache::openInMemory(tunetest::quiet());
  BuildTarget target{"sm_90", "13.0"};
  CountingCompile compile;
  compile.fail = true;
  Expected<DecodeImage> image =
      buildDecodeImage(&db, fakePlan("x"), target, compile.fn());
  ASSERT_FALSE(image.ok());
  EXPECT_NE(image.message().find("nvrtc said no"), std::string::npos);
  compile.fail = false;
  image = buildDecodeImage(&db, fakePlan("x"), target, compile.fn());
  ASSERT_TRUE(image.ok());
  EXPECT_FALSE(image->cacheHit);
  EXPECT_EQ(compile.calls, 2);
}

TEST(DecodeLoader, RealPlanIsCompiledOnceThenRead) {
  if (!cuda::Nvrtc::get().available())
    GTEST_SKIP() << "NVRTC not found: "
                 << cuda::Nvrtc::get().status().message();
  Spec spec = findPreset("kda")->spec;
  spec.keyDim = spec.valueDim = 64;
  spec.heads = spec.valueHeads = 2;
  Expected<DecodePlan> plan = planDecodeKernel(spec);
  ASSERT_TRUE(plan.ok()) << plan.message();
  cache::Cache db = cache::Cache::openInMemory(tunetest::quiet());
  BuildTarget target{"sm_90", nvrtcVersionString()};
  int compiles = 0;
  DecodeCompileFn counted = [&](const DecodePlan &p, const std::string &arch) {
    ++compiles;
    return compileDecodePlan(p, arch);
  };
  Expected<DecodeImage> cold = buildDecodeImage(&db, *plan, target, counted);
  ASSERT_TRUE(cold.ok()) << cold.message();
  EXPECT_EQ(cold->cubin.compare(0, 4,
                                "\x7f"
                                "ELF"),
            0);
  Expected<DecodeImage> warm = buildDecodeImage(&db, *plan, target, counted);
  ASSERT_TRUE(warm.ok()) << warm.message();
  EXPECT_TRUE(warm->cacheHit);
  EXPECT_EQ(compiles, 1);
  EXPECT_EQ(warm->cubin, cold->cubin);
}

TEST(DecodeLoader, NoGpuIsTheDriversError) {
  if (cuda::queryDevice(0).ok())
    GTEST_SKIP() << "a GPU is present";
  Spec spec = findPreset("gdn")->spec;
  Expected<DecodePlan> plan = planDecodeKernel(spec);
  ASSERT_TRUE(plan.ok()) << plan.message();
  Expected<DecodeKernel> kernel = loadDecodeKernel(*plan);
  ASSERT_FALSE(kernel.ok());
  EXPECT_NE(kernel.message().find("no CUDA driver"), std::string::npos)
      << kernel.message();
}

} // namespace
} // namespace lina
