//===- BackwardTuneCApiTest.cpp - lina_tune with LINA_TUNE_BACKWARD -----===//
//
// Part of lina. Through liblina.so, in a cache of the test's own (the
// process's cache is opened once, hence an executable of its own): a
// simulated backward tune's winner holds only the backward's knobs, a
// second tune reads everything back, the forward's tune of the same spec is
// a separate result, the refusals of lina_tune and of
// lina_backward_create_for_shape, and without a GPU the missing driver.
//
//===----------------------------------------------------------------------===//
#include "lina/lina.h"
#include "lina/lina_c.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace {

class TempCacheDir : public ::testing::Environment {
public:
  void SetUp() override {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "lina-bwd-tune-XXXXXX")
            .string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir = pattern;
    setenv("LINA_CACHE_DIR", dir.c_str(), 1);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::string dir;
};

TempCacheDir *const cacheDir = static_cast<TempCacheDir *>(
    ::testing::AddGlobalTestEnvironment(new TempCacheDir));

std::string preset(const char *name, int64_t dim, int64_t heads) {
  char *text = nullptr;
  EXPECT_EQ(lina_preset_spec(name, dim, dim, heads, heads, "bf16", &text),
            LINA_OK)
      << lina_last_error();
  std::string spec = text ? text : "";
  lina_free_string(text);
  return spec;
}

bool hasGpu() {
  lina_kernel *kernel = nullptr;
  lina_status status =
      lina_kernel_create(preset("gla", 64, 2).c_str(), nullptr, 0, &kernel);
  lina_kernel_destroy(kernel);
  return status != LINA_NO_DRIVER;
}

const int kBackwardFast = LINA_TUNE_FAST | LINA_TUNE_BACKWARD;

TEST(BackwardTuneCApi, ASimulatedTuneRecordsABackwardSchedule) {
  std::string spec = preset("gdn", 64, 4);
  lina_tune_result r;
  ASSERT_EQ(lina_tune(spec.c_str(), 2, 256, kBackwardFast, 0, 1, &r), LINA_OK)
      << lina_last_error();
  EXPECT_STREQ(lina_last_error(), "");
  const lina_schedule &s = r.schedule;
  EXPECT_TRUE(s.chunk_size == 16 || s.chunk_size == 32 || s.chunk_size == 64)
      << s.chunk_size;
  EXPECT_TRUE(s.tile_v == 16 || s.tile_v == 32 || s.tile_v == 64) << s.tile_v;
  EXPECT_TRUE(s.warps == 2 || s.warps == 4 || s.warps == 8 || s.warps == 16) << s.warps;
  // The forward's knobs are not the backward's: left at their defaults, so
  // the schedule can be passed to lina_backward_create as it is.
  EXPECT_EQ(s.strategy, LINA_STRATEGY_DEFAULT);
  EXPECT_EQ(s.prefetch, LINA_PREFETCH_DEFAULT);
  EXPECT_EQ(s.segments, 0);
  EXPECT_EQ(s.mma, LINA_MMA_DEFAULT);
  EXPECT_GT(r.time_ms, 0);
  // Chunk 16..128, tile-v 16..64, warps, barrier window 0 or 16.
  EXPECT_EQ(r.candidates, 4 * 3 * 4 * 2);
  EXPECT_GT(r.tried, 0);
  EXPECT_LE(r.tried, 12);
  EXPECT_EQ(r.recorded, 0);
  EXPECT_EQ(r.saved, 1) << r.not_saved_reason;

  lina_tune_result again;
  ASSERT_EQ(lina_tune(spec.c_str(), 2, 200, kBackwardFast, 0, 1, &again),
            LINA_OK)
      << lina_last_error();
  EXPECT_EQ(again.tried, 0);
  EXPECT_EQ(again.recorded, r.tried);
  EXPECT_EQ(again.time_ms, r.time_ms);

  // The forward's tune of the same spec and bucket is its own: nothing of
  // the backward's is read back.
  lina_tune_result forward;
  ASSERT_EQ(lina_tune(spec.c_str(), 2, 256, LINA_TUNE_FAST, 0, 1, &forward),
            LINA_OK)
      << lina_last_error();
  EXPECT_EQ(forward.recorded, 0);
  EXPECT_NE(forward.schedule.strategy, LINA_STRATEGY_DEFAULT);

  // A full sweep reads fast's candidates back and tries the rest.
  lina_tune_result full;
  ASSERT_EQ(lina_tune(spec.c_str(), 2, 256,
                      LINA_TUNE_FULL | LINA_TUNE_BACKWARD, 0, 1, &full),
            LINA_OK)
      << lina_last_error();
  EXPECT_EQ(full.recorded, r.tried);
  EXPECT_EQ(full.tried + full.recorded, full.candidates - full.pruned);
  EXPECT_LE(full.time_ms, r.time_ms);
}

TEST(BackwardTuneCApi, TheCppApiTunesTheBackwardToo) {
  lina::TuneOptions options;
  options.simulate = true;
  options.backward = true;
  lina::TuneResult r = lina::tune(preset("kda", 64, 2), 1, 512, options);
  EXPECT_GT(r.tried, 0);
  EXPECT_GT(r.schedule.chunk_size, 0);
  EXPECT_EQ(r.schedule.strategy, LINA_STRATEGY_DEFAULT);
}

TEST(BackwardTuneCApi, BadModesAndShapesAreArgumentErrors) {
  std::string spec = preset("gdn", 64, 2);
  lina_tune_result r;
  EXPECT_EQ(lina_tune(spec.c_str(), 1, 64, 7 | LINA_TUNE_BACKWARD, 0, 1, &r),
            LINA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lina_last_error())
                .find("mode must be LINA_TUNE_FAST or LINA_TUNE_FULL, got 23 "
                      "(either may be or'ed with LINA_TUNE_BACKWARD)"),
            std::string::npos)
      << lina_last_error();
  EXPECT_EQ(lina_tune(spec.c_str(), 0, 64, kBackwardFast, 0, 1, &r),
            LINA_INVALID_ARGUMENT);

  lina_backward_kernel *kernel = nullptr;
  EXPECT_EQ(lina_backward_create_for_shape(nullptr, nullptr, 1, 64, 0, &kernel),
            LINA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lina_last_error()).find("must not be NULL"),
            std::string::npos);
  EXPECT_EQ(lina_backward_create_for_shape(spec.c_str(), nullptr, -1, 64, 0,
                                           &kernel),
            LINA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lina_last_error())
                .find("batch and seq_len must not be negative (0: the shape "
                      "is not known), got -1 and 64"),
            std::string::npos)
      << lina_last_error();
  // A forward knob is refused by name, with or without a shape.
  lina_schedule forwardKnob = {};
  forwardKnob.strategy = LINA_STRATEGY_SPLIT;
  EXPECT_EQ(lina_backward_create_for_shape(spec.c_str(), &forwardKnob, 1, 64,
                                           0, &kernel),
            LINA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lina_last_error()).find("'strategy' is a forward knob"),
            std::string::npos)
      << lina_last_error();
  EXPECT_EQ(kernel, nullptr);
  lina_schedule out;
  EXPECT_EQ(lina_backward_schedule(nullptr, &out), LINA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lina_last_error())
                .find("lina_backward_schedule: kernel and out must not be "
                      "NULL"),
            std::string::npos);
}

TEST(BackwardTuneCApi, WithoutAGpuOnlyASimulatedTuneRuns) {
  if (hasGpu())
    GTEST_SKIP() << "a GPU is present: the no-driver path cannot be shown";
  std::string spec = preset("gdn", 64, 2);
  lina_tune_result r;
  EXPECT_EQ(lina_tune(spec.c_str(), 1, 64, kBackwardFast, 0, 0, &r),
            LINA_NO_DRIVER);
  EXPECT_NE(std::string(lina_last_error())
                .find("simulate = 1 tunes on the cost model"),
            std::string::npos)
      << lina_last_error();
  lina_backward_kernel *kernel = nullptr;
  EXPECT_EQ(lina_backward_create_for_shape(spec.c_str(), nullptr, 1, 64, 0,
                                           &kernel),
            LINA_NO_DRIVER);
  EXPECT_EQ(kernel, nullptr);
}

// On a GPU: a real backward tune, then a backward kernel for a shape of the
// bucket is built with the winner, and one for an unknown shape with the
// default, as lina_backward_create builds it.
TEST(BackwardTuneCApi, ARealTuneThenKernelsOfTheBucket) {
  if (!hasGpu())
    GTEST_SKIP() << "no GPU: a real tune cannot run";
  std::string spec = preset("gla", 64, 2);
  lina_tune_result r;
  ASSERT_EQ(lina_tune(spec.c_str(), 2, 1000, kBackwardFast, 0, 0, &r), LINA_OK)
      << lina_last_error();
  EXPECT_GT(r.time_ms, 0);
  EXPECT_EQ(r.saved, 1) << r.not_saved_reason;
  lina_backward_kernel *tuned = nullptr, *open = nullptr;
  ASSERT_EQ(lina_backward_create_for_shape(spec.c_str(), nullptr, 2, 900, 0,
                                           &tuned),
            LINA_OK)
      << lina_last_error();
  lina_schedule built;
  ASSERT_EQ(lina_backward_schedule(tuned, &built), LINA_OK);
  EXPECT_EQ(built.chunk_size, r.schedule.chunk_size);
  EXPECT_EQ(built.tile_v, r.schedule.tile_v);
  EXPECT_EQ(built.warps, r.schedule.warps);
  // With no shape: the default, whatever was tuned.
  ASSERT_EQ(
      lina_backward_create_for_shape(spec.c_str(), nullptr, 0, 0, 0, &open),
      LINA_OK)
      << lina_last_error();
  lina_backward_kernel *plain = nullptr;
  ASSERT_EQ(lina_backward_create(spec.c_str(), nullptr, 0, &plain), LINA_OK)
      << lina_last_error();
  lina_schedule fallback, byDefault;
  ASSERT_EQ(lina_backward_schedule(open, &fallback), LINA_OK);
  ASSERT_EQ(lina_backward_schedule(plain, &byDefault), LINA_OK);
  EXPECT_EQ(fallback.chunk_size, byDefault.chunk_size);
  EXPECT_EQ(fallback.tile_v, byDefault.tile_v);
  EXPECT_EQ(fallback.warps, byDefault.warps);
  lina_backward_destroy(tuned);
  lina_backward_destroy(open);
  lina_backward_destroy(plain);
}

} // namespace
