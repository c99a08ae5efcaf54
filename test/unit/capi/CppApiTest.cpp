//===- CppApiTest.cpp - lina/lina.h over the C API, without a GPU ------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/lina.h"

#include <gtest/gtest.h>

namespace {

TEST(CppApi, PresetSpecAndErrorsAsExceptions) {
  std::string spec = lina::presetSpec("kda", 64, 32, 2, 4, "f16");
  EXPECT_NE(spec.find("lina.recurrence @kda <decay = per_channel"),
            std::string::npos);
  EXPECT_NE(spec.find("dtype = f16"), std::string::npos);
  try {
    lina::presetSpec("softmax", 64, 64, 1, 1, "bf16");
    FAIL() << "an unknown preset must throw";
  } catch (const lina::Error &e) {
    EXPECT_EQ(e.status(), LINA_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("unknown preset 'softmax'"),
              std::string::npos);
  }
}

TEST(CppApi, KernelWithoutDriverThrowsNoDriver) {
  try {
    lina::Kernel k = lina::Kernel::fromPreset("gdn", 64, 64, 2, 2, "bf16");
    GTEST_SKIP() << "a GPU is present: the no-driver path cannot be shown";
  } catch (const lina::Error &e) {
    EXPECT_EQ(e.status(), LINA_NO_DRIVER);
    EXPECT_NE(std::string(e.what()).find("no CUDA driver found"),
              std::string::npos);
  }
}

TEST(CppApi, BadScheduleNamesTheLimit) {
  lina::KernelOptions options;
  options.chunkSize = 48;
  try {
    lina::Kernel::fromPreset("gla", 64, 64, 1, 1, "bf16", options);
    FAIL() << "chunk size 48 must be refused";
  } catch (const lina::Error &e) {
    EXPECT_EQ(e.status(), LINA_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("chunk-size must be 16, 32, 64 or "
                                         "128, got 48"),
              std::string::npos)
        << e.what();
  }
}

TEST(CppApi, SegmentsReachThePlanner) {
  lina::KernelOptions options;
  options.segments = 2;
  options.batch = 2;
  options.seqLen = 16384;
  try {
    lina::Kernel::fromPreset("gdn", 128, 128, 16, 16, "bf16", options);
    FAIL() << "the delta rule cannot run in segments";
  } catch (const lina::Error &e) {
    EXPECT_EQ(e.status(), LINA_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("segments: "), std::string::npos)
        << e.what();
  }
}

// The lent workspace through lina::Kernel: the size per shape, and a
// workspace one byte short thrown as the C API refuses it (made-up aligned
// addresses: a refused call reads none of them).
TEST(CppApi, WorkspaceSizeAndRefusalOnAGpu) {
  lina::KernelOptions options;
  options.strategy = LINA_STRATEGY_MATERIALIZE;
  options.mma = LINA_MMA_WARP;
  try {
    lina::Kernel k =
        lina::Kernel::fromPreset("gdn", 64, 64, 2, 2, "bf16", options);
    size_t bytes = k.workspaceSize(2, 512);
    EXPECT_GT(bytes, k.workspaceSize(2, 256));
    auto fake = [](int slot) {
      return reinterpret_cast<void *>(uint64_t(slot + 1) << 36);
    };
    lina::Inputs in = {};
    in.q = fake(0);
    in.k = fake(1);
    in.v = fake(2);
    in.g = static_cast<const float *>(fake(3));
    in.beta = static_cast<const float *>(fake(4));
    in.o = fake(5);
    in.initial_state = static_cast<const float *>(fake(7));
    in.final_state = static_cast<float *>(fake(8));
    in.batch = 2;
    in.seq_len = 512;
    try {
      k.forward(in, fake(6), bytes - 1);
      FAIL() << "a workspace one byte short must be refused";
    } catch (const lina::Error &e) {
      EXPECT_EQ(e.status(), LINA_INVALID_ARGUMENT);
      EXPECT_NE(std::string(e.what()).find(
                    "needs a workspace of " + std::to_string(bytes)),
                std::string::npos)
          << e.what();
    }
  } catch (const lina::Error &e) {
    if (e.status() != LINA_NO_DRIVER)
      throw;
    GTEST_SKIP() << "no GPU: a kernel cannot be created";
  }
}

} // namespace
