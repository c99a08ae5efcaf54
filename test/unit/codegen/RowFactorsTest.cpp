//===- RowFactorsTest.cpp - Scaled input rows the scan rescales ---------===//
//
// Part of lina. Which split scans load q and k from the inputs and apply
// their row factors themselves (RowFactors.h), what the prepare kernel then
// stores, and that those kernels compile. Whether the values are right is
// the GPU suite's job (its split "+tv128w8" cases, with and without
// prefetch, and the tiny "+tv64w4" ones).
//
//===----------------------------------------------------------------------===//
#include "ExpectCubin.h"
#include "KernelText.h"
#include "lina/Runtime/Nvrtc.h"
#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

using namespace lina;
using test::count;
using test::scanKernel;

namespace {

KernelPlan splitPlan(const char *preset, int64_t tileV, bool prefetch = true) {
  Spec spec = findPreset(preset)->spec;
  ScheduleOptions schedule = defaultSchedule(spec);
  schedule.strategy = Strategy::Split;
  schedule.chunkSize = 16;
  schedule.tileV = tileV;
  schedule.warps = 8;
  schedule.prefetch = prefetch;
  return test::plan(spec, schedule);
}

// Scalar gates on whole heads (each warp owns its value columns): the scan
// copies q and k from the inputs, and q S's rows and the update's take
// their factors from the chunk's factor table (c exp(G) for q, exp(G_last -
// G) for k), which also holds the state's decay factor. The prepare kernel
// stores neither decayed tile: the record is the bf16 16 x 16 intra-chunk
// product (128 floats) and the table (two values' 16 factors and a 16-byte
// word for the decay factor).
TEST(RowFactors, ScalarGatesOnWholeHeadsLoadQAndK) {
  for (const char *preset : {"mamba2", "retnet"}) {
    SCOPED_TRACE(preset);
    KernelPlan p = splitPlan(preset, 128);
    std::string scan = scanKernel(p);
    EXPECT_EQ(count(scan, "p.q + "), 1u) << scan;
    EXPECT_EQ(count(scan, "p.k + "), 1u) << scan;
    EXPECT_EQ(count(scan, "stored_rows{"), 2u) << scan;
    EXPECT_EQ(count(scan, "S.decay<1, true>("), 1u) << scan;
    EXPECT_EQ(p.chunkDataFloats, 128 + 2 * 16 + 4);
    std::string prepare = test::kernelText(p, p.prepareKernel);
    EXPECT_EQ(count(prepare, "store_row_factors<16, 128, false, false>("), 1u)
        << prepare;
    EXPECT_EQ(count(prepare, "store_row_factors<16, 128, true, false>("), 1u)
        << prepare;
    EXPECT_EQ(count(prepare, "store_tile<16, 128,"), 0u) << prepare;
    EXPECT_EQ(count(prepare, ".to_global("), 0u) << prepare;
  }
}

// Where warps split the key columns (tv32 w8: four ways) the factors would
// lengthen each warp's short share of the serial step: the scan keeps the
// decayed tiles the prepare kernel stores.
TEST(RowFactors, SplitKeyColumnsKeepTheStoredTiles) {
  KernelPlan p = splitPlan("mamba2", 32);
  std::string scan = scanKernel(p);
  EXPECT_EQ(count(scan, "stored_rows{"), 0u) << scan;
  EXPECT_EQ(count(scan, "p.q + "), 0u) << scan;
  EXPECT_GT(p.chunkDataFloats, 2 * 16 * 128 / 2);
}

// l2-normalised q and k (gdn) take the rows' inverse norms into their
// factors, which the prepare kernel reads from the inputs; W and U stay
// stored tiles. DeltaNet has no gate sums to keep a table with, and keeps
// its stored tiles.
TEST(RowFactors, NormalizedRowsTakeTheirNormsIntoTheFactors) {
  KernelPlan p = splitPlan("gdn", 128);
  std::string scan = scanKernel(p);
  EXPECT_EQ(count(scan, "p.q + "), 1u) << scan;
  EXPECT_EQ(count(scan, "p.k + "), 1u) << scan;
  EXPECT_EQ(count(scan, "stored_rows{"), 2u) << scan;
  std::string prepare = test::kernelText(p, p.prepareKernel);
  EXPECT_EQ(count(prepare, "store_row_factors<16, 128, false, true>("), 1u)
      << prepare;
  EXPECT_EQ(count(prepare, "store_row_factors<16, 128, true, true>("), 1u)
      << prepare;
  EXPECT_EQ(count(prepare, "tri_solve_to_global<"), 2u) << prepare;

  std::string deltanet = scanKernel(splitPlan("deltanet", 128));
  EXPECT_EQ(count(deltanet, "stored_rows{"), 0u) << deltanet;
}

TEST(RowFactors, Compile) {
  const cuda::Nvrtc &nvrtc = cuda::Nvrtc::get();
  if (!nvrtc.available())
    GTEST_SKIP() << nvrtc.status().message();
  for (const char *preset : {"mamba2", "retnet", "gdn"})
    for (bool prefetch : {true, false}) {
      SCOPED_TRACE(std::string(preset) + (prefetch ? " prefetch" : ""));
      KernelPlan p = splitPlan(preset, 128, prefetch);
      ASSERT_EQ(count(scanKernel(p), "stored_rows{"), 2u);
      ASSERT_NO_FATAL_FAILURE(test::expectCubinForSm90(p.source));
    }
}

} // namespace
