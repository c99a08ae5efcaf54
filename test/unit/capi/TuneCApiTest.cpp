//===- TuneCApiTest.cpp - lina_tune and lina::tune ---------------------===//
//
// Part of lina. Through liblina.so, in a cache of the test's own
// (LINA_CACHE_DIR is set before anything opens the process's cache, which
// is opened once): a simulated tune's winner and counts, that a second tune
// reads everything back, the refusals, and without a GPU the missing
// driver. On a GPU, a real tune's winner is what a kernel created for a
// shape of the same bucket is built with.
//
//===----------------------------------------------------------------------===//
#include "lina/lina.h"
#include "lina/lina_c.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace {

/// A temporary LINA_CACHE_DIR for the whole process.
class TempCacheDir : public ::testing::Environment {
public:
  void SetUp() override {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "lina-tune-capi-XXXXXX")
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

// The schedule's knobs are values a tune tries (docs/autotune.md).
void expectATunedSchedule(const lina_schedule &s) {
  EXPECT_TRUE(s.chunk_size == 16 || s.chunk_size == 32 || s.chunk_size == 64 ||
              s.chunk_size == 128)
      << s.chunk_size;
  EXPECT_TRUE(s.tile_v >= 16 && s.tile_v <= 128 &&
              (s.tile_v & (s.tile_v - 1)) == 0)
      << s.tile_v;
  EXPECT_TRUE(s.warps == 2 || s.warps == 4 || s.warps == 8) << s.warps;
  EXPECT_NE(s.strategy, LINA_STRATEGY_DEFAULT);
  EXPECT_NE(s.prefetch, LINA_PREFETCH_DEFAULT);
  EXPECT_GE(s.segments, 1);
  EXPECT_NE(s.mma, LINA_MMA_DEFAULT);
}

TEST(TuneCApi, ASimulatedTuneRecordsAViableWinner) {
  std::string spec = preset("kda", 64, 4);
  lina_tune_result r;
  ASSERT_EQ(lina_tune(spec.c_str(), 2, 256, LINA_TUNE_FAST, 0, 1, &r), LINA_OK)
      << lina_last_error();
  EXPECT_STREQ(lina_last_error(), "");
  expectATunedSchedule(r.schedule);
  EXPECT_GT(r.time_ms, 0);
  EXPECT_GT(r.candidates, r.pruned);
  EXPECT_GT(r.pruned, 0);
  EXPECT_GT(r.tried, 0);
  EXPECT_LE(r.tried, 12);
  EXPECT_EQ(r.recorded, 0);
  EXPECT_EQ(r.saved, 1);
  EXPECT_STREQ(r.not_saved_reason, "");
  EXPECT_TRUE(std::filesystem::exists(cacheDir->dir + "/lina.db"));

  // The next tune of the same spec and bucket times nothing: every
  // candidate is read back from the cache, and the winner is the same.
  lina_tune_result again;
  ASSERT_EQ(lina_tune(spec.c_str(), 2, 200, LINA_TUNE_FAST, 0, 1, &again),
            LINA_OK)
      << lina_last_error();
  EXPECT_EQ(again.tried, 0);
  EXPECT_EQ(again.recorded, r.tried);
  EXPECT_EQ(again.schedule.chunk_size, r.schedule.chunk_size);
  EXPECT_EQ(again.schedule.tile_v, r.schedule.tile_v);
  EXPECT_EQ(again.schedule.warps, r.schedule.warps);
  EXPECT_EQ(again.schedule.strategy, r.schedule.strategy);
  EXPECT_EQ(again.time_ms, r.time_ms);

  // A full sweep then looks at every viable candidate; the fast ones are
  // read back.
  lina_tune_result full;
  ASSERT_EQ(lina_tune(spec.c_str(), 2, 256, LINA_TUNE_FULL, 0, 1, &full),
            LINA_OK)
      << lina_last_error();
  EXPECT_EQ(full.tried + full.recorded, full.candidates - full.pruned);
  EXPECT_EQ(full.recorded, r.tried);
  EXPECT_LE(full.time_ms, r.time_ms);
}

TEST(TuneCApi, BadArgumentsAreArgumentErrors) {
  std::string spec = preset("gdn", 64, 2);
  lina_tune_result r;
  struct Case {
    const char *spec;
    int64_t batch, seqLen;
    int mode;
    lina_tune_result *out;
    const char *message;
  };
  for (const Case &c :
       {Case{nullptr, 1, 64, LINA_TUNE_FAST, &r,
             "lina_tune: spec_text and out must not be NULL"},
        Case{spec.c_str(), 1, 64, LINA_TUNE_FAST, nullptr,
             "lina_tune: spec_text and out must not be NULL"},
        Case{spec.c_str(), 0, 64, LINA_TUNE_FAST, &r,
             "lina_tune: batch and seq_len must be at least 1, got 0 and 64"},
        Case{spec.c_str(), 1, 0, LINA_TUNE_FAST, &r,
             "lina_tune: batch and seq_len must be at least 1, got 1 and 0"},
        Case{spec.c_str(), -2, 64, LINA_TUNE_FULL, &r,
             "lina_tune: batch and seq_len must be at least 1, got -2 and 64"},
        Case{spec.c_str(), 1, 64, 7, &r,
             "lina_tune: mode must be LINA_TUNE_FAST or LINA_TUNE_FULL, got "
             "7"},
        // A preset's name is no spec: lina_preset_spec makes one.
        Case{"gdn", 1, 64, LINA_TUNE_FAST, &r, "spec"}}) {
    SCOPED_TRACE(c.message);
    EXPECT_EQ(lina_tune(c.spec, c.batch, c.seqLen, c.mode, 0, 1,
                        c.out),
              LINA_INVALID_ARGUMENT);
    EXPECT_NE(std::string(lina_last_error()).find(c.message), std::string::npos)
        << lina_last_error();
  }
  // A spec the verifier refuses names the field.
  std::string bad = spec;
  bad.replace(bad.find("value_heads = 2"), 15, "value_heads = 3");
  EXPECT_EQ(lina_tune(bad.c_str(), 1, 64, LINA_TUNE_FAST, 0, 1, &r),
            LINA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lina_last_error()).find("multiple of heads"),
            std::string::npos)
      << lina_last_error();
}

TEST(TuneCApi, WithoutAGpuOnlyASimulatedTuneRuns) {
  if (hasGpu())
    GTEST_SKIP() << "a GPU is present: the no-driver path cannot be shown";
  lina_tune_result r;
  EXPECT_EQ(
      lina_tune(preset("gdn", 64, 2).c_str(), 1, 64, LINA_TUNE_FAST, 0, 0, &r),
      LINA_NO_DRIVER);
  std::string message = lina_last_error();
  EXPECT_NE(message.find("no CUDA driver found"), std::string::npos) << message;
  EXPECT_NE(message.find("simulate = 1 tunes on the cost model"),
            std::string::npos)
      << message;
}

// The whole loop on a GPU: what the tune recorded is what a kernel made for
// a shape of the same bucket is built with, in this process.
TEST(TuneCApi, ARealTunesWinnerIsWhatKernelsOfTheBucketUse) {
  if (!hasGpu())
    GTEST_SKIP() << "no GPU: a real tune cannot run (the simulated one is "
                    "recorded for a GPU no device matches)";
  std::string spec = preset("gla", 64, 2);
  // A kernel made before the tune: its bucket's choice must not stick.
  lina_kernel *before = nullptr;
  ASSERT_EQ(
      lina_kernel_create_for_shape(spec.c_str(), nullptr, 2, 1000, 0, &before),
      LINA_OK)
      << lina_last_error();
  lina_kernel_destroy(before);
  lina_tune_result r;
  ASSERT_EQ(lina_tune(spec.c_str(), 2, 1000, LINA_TUNE_FAST, 0, 0, &r), LINA_OK)
      << lina_last_error();
  expectATunedSchedule(r.schedule);
  EXPECT_EQ(r.saved, 1) << r.not_saved_reason;
  lina_kernel *kernel = nullptr;
  ASSERT_EQ(
      lina_kernel_create_for_shape(spec.c_str(), nullptr, 2, 900, 0, &kernel),
      LINA_OK)
      << lina_last_error();
  lina_schedule built;
  ASSERT_EQ(lina_kernel_schedule(kernel, &built), LINA_OK);
  lina_kernel_destroy(kernel);
  EXPECT_EQ(built.chunk_size, r.schedule.chunk_size);
  EXPECT_EQ(built.tile_v, r.schedule.tile_v);
  EXPECT_EQ(built.warps, r.schedule.warps);
  EXPECT_EQ(built.strategy, r.schedule.strategy);
  EXPECT_EQ(built.prefetch, r.schedule.prefetch);
  EXPECT_EQ(built.segments, r.schedule.segments);
  EXPECT_EQ(built.mma, r.schedule.mma);
}

TEST(TuneCppApi, ResultsAndErrorsAsExceptions) {
  lina::TuneOptions options;
  options.simulate = true;
  lina::TuneResult r = lina::tune(
      lina::presetSpec("rwkv7", 64, 64, 4, 4, "bf16"), 1, 512, options);
  expectATunedSchedule(r.schedule);
  EXPECT_GT(r.timeMs, 0);
  EXPECT_GT(r.tried + r.recorded, 0);
  EXPECT_TRUE(r.saved) << r.notSavedReason;
  try {
    lina::tune(lina::presetSpec("rwkv7", 64, 64, 4, 4, "bf16"), 1, 0, options);
    FAIL() << "seq_len 0 was accepted";
  } catch (const lina::Error &e) {
    EXPECT_EQ(e.status(), LINA_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("seq_len must be at least 1"),
              std::string::npos)
        << e.what();
  }
}

} // namespace
