//===- PtxasReportTest.cpp - Reading ptxas's per-kernel report ----------===//
//
// Part of lina. The report as NVRTC 13 prints it, and the occupancy it
// implies (the numbers Nsight Compute showed for the same kernels).
//
//===----------------------------------------------------------------------===//
#include "lina/Runtime/PtxasReport.h"

#include <gtest/gtest.h>

using namespace lina::cuda;

namespace {

const char *kLog =
    "ptxas info    : 144 bytes gmem\n"
    "ptxas info    : Compiling entry function 'lina_chunk_split_scan' for "
    "'sm_90'\n"
    "ptxas info    : Function properties for lina_chunk_split_scan\n"
    "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes "
    "spill loads\n"
    "ptxas info    : Used 128 registers, used 1 barriers\n"
    "ptxas info    : Compile time = 235.220 ms\n"
    "ptxas info    : Compiling entry function 'lina_chunk_prepare' for "
    "'sm_90'\n"
    "ptxas info    : Function properties for lina_chunk_prepare\n"
    "ptxas         .     24 bytes stack frame, 16 bytes spill stores, 12 "
    "bytes spill loads\n"
    "ptxas info    : Used 255 registers, used 1 barriers\n";

TEST(PtxasReport, ReadsEachKernelsRegistersAndSpills) {
  std::vector<KernelResources> kernels = parsePtxasReport(kLog);
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_EQ(kernels[0].kernel, "lina_chunk_split_scan");
  EXPECT_EQ(kernels[0].registers, 128);
  EXPECT_FALSE(kernels[0].spills());
  EXPECT_EQ(kernels[1].kernel, "lina_chunk_prepare");
  EXPECT_EQ(kernels[1].registers, 255);
  EXPECT_EQ(kernels[1].stackBytes, 24);
  EXPECT_EQ(kernels[1].spillStoreBytes, 16);
  EXPECT_EQ(kernels[1].spillLoadBytes, 12);
  EXPECT_TRUE(kernels[1].spills());
}

TEST(PtxasReport, ALogWithoutAReportHasNoKernels) {
  EXPECT_TRUE(parsePtxasReport("").empty());
  EXPECT_TRUE(parsePtxasReport("warning: something else\n").empty());
}

// Nsight Compute's block limits for earlier kernels, on the H200: gdn's
// prepare (48 registers, 37 KB) 5 CTAs of 256 threads, kda's (63, 61 KB) 3
// by shared memory, the 174-register mistake 1, a 128-register scan 2.
TEST(PtxasReport, CtasPerMultiprocessorTakesTheTightestLimit) {
  EXPECT_EQ(ctasPerMultiprocessor(48, 256, 37 * 1024), 5);
  EXPECT_EQ(ctasPerMultiprocessor(63, 256, 61 * 1024), 3);
  EXPECT_EQ(ctasPerMultiprocessor(64, 256, 52 * 1024), 4);
  EXPECT_EQ(ctasPerMultiprocessor(174, 256, 20 * 1024), 1);
  EXPECT_EQ(ctasPerMultiprocessor(128, 256, 40 * 1024), 2);
  EXPECT_EQ(ctasPerMultiprocessor(32, 256, 0), 8); // by threads
  EXPECT_EQ(ctasPerMultiprocessor(255, 1024, 0), 0);
}

} // namespace
