//===- SideBySideTest.cpp - When the prepare kernel runs beside the scan -===//
//
// Part of lina. forward() runs a split plan's scan beside its prepare kernel
// only where the scan leaves a multiprocessor without a scan CTA: the scan
// waits for the prepare kernel, which then always has somewhere to run.
// With as many scan CTAs as multiprocessors, every one could hold a
// waiting scan CTA and no room for a prepare CTA.
//
//===----------------------------------------------------------------------===//
#include "lina/Runtime/ChunkKernel.h"

#include "gtest/gtest.h"

#include <cstdlib>

using namespace lina;

namespace {

KernelPlan splitPlan() {
  KernelPlan plan;
  plan.strategy = Strategy::Split;
  plan.prepareKernel = "lina_chunk_prepare";
  return plan;
}

TEST(SideBySide, OnlyWhereTheScanLeavesAMultiprocessorFree) {
  KernelPlan plan = splitPlan();
  EXPECT_TRUE(runsPrepareBesideScan(plan, 96, 132));
  EXPECT_TRUE(runsPrepareBesideScan(plan, 131, 132));
  EXPECT_FALSE(runsPrepareBesideScan(plan, 132, 132));
  EXPECT_FALSE(runsPrepareBesideScan(plan, 256, 132));
  EXPECT_FALSE(runsPrepareBesideScan(plan, 0, 132));
  // A device whose multiprocessors were not counted.
  EXPECT_FALSE(runsPrepareBesideScan(plan, 1, 0));
}

TEST(SideBySide, OnlySplitPlansWithAPrepareKernel) {
  KernelPlan nothingStored = splitPlan();
  nothingStored.prepareKernel.clear();
  EXPECT_FALSE(runsPrepareBesideScan(nothingStored, 8, 132));
  for (Strategy strategy : {Strategy::FusedScan, Strategy::Materialize}) {
    KernelPlan other = splitPlan();
    other.strategy = strategy;
    EXPECT_FALSE(runsPrepareBesideScan(other, 8, 132)) << toString(strategy);
  }
}

TEST(SideBySide, TheEnvironmentTurnsItOff) {
  KernelPlan plan = splitPlan();
  for (const char *off : {"off", "0"}) {
    setenv("LINA_OVERLAP", off, 1);
    EXPECT_FALSE(runsPrepareBesideScan(plan, 8, 132)) << off;
  }
  setenv("LINA_OVERLAP", "on", 1);
  EXPECT_TRUE(runsPrepareBesideScan(plan, 8, 132));
  unsetenv("LINA_OVERLAP");
  EXPECT_TRUE(runsPrepareBesideScan(plan, 8, 132));
}

} // namespace
