//===- CApiTest.cpp - The C API's error paths, without a GPU -----------===//
//
// Part of lina. Links liblina.so itself, so what is tested is what users
// load: statuses, messages, and that nothing aborts or throws across it.
//
//===----------------------------------------------------------------------===//
#include "lina/lina_c.h"

#include <gtest/gtest.h>

#include <string>

namespace {

TEST(CApi, PresetSpecRoundTrip) {
  char *text = nullptr;
  ASSERT_EQ(lina_preset_spec("gdn", 64, 64, 4, 8, "bf16", &text), LINA_OK)
      << lina_last_error();
  std::string spec(text);
  lina_free_string(text);
  EXPECT_NE(spec.find("lina.recurrence @gdn <decay = scalar, update = delta"),
            std::string::npos)
      << spec;
  EXPECT_NE(spec.find("value_heads = 8"), std::string::npos);
  EXPECT_STREQ(lina_last_error(), "");
}

TEST(CApi, PresetSpecTakesFlaNames) {
  char *text = nullptr;
  ASSERT_EQ(lina_preset_spec("gated_delta_rule", 64, 64, 4, 4, "bf16", &text),
            LINA_OK)
      << lina_last_error();
  std::string spec(text);
  lina_free_string(text);
  EXPECT_NE(spec.find("lina.recurrence @gdn <decay = scalar, update = delta"),
            std::string::npos)
      << spec;
  EXPECT_EQ(lina_preset_spec("gated_delta_rul", 64, 64, 4, 4, "bf16", &text),
            LINA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lina_last_error())
                .find("unknown preset 'gated_delta_rul'; did you mean "
                      "'gated_delta_rule'?"),
            std::string::npos)
      << lina_last_error();
}

TEST(CApi, ShapeBucketNamesTheTuningBucket) {
  char buf[64];
  ASSERT_EQ(lina_shape_bucket(4, 2048, 16, buf, sizeof buf), LINA_OK)
      << lina_last_error();
  EXPECT_STREQ(buf, "bh=33..64,t=1025..4096");
  // Shapes in one bucket share it; another T range does not.
  char other[64];
  ASSERT_EQ(lina_shape_bucket(2, 3000, 32, other, sizeof other), LINA_OK);
  EXPECT_STREQ(other, buf);
  ASSERT_EQ(lina_shape_bucket(4, 8192, 16, other, sizeof other), LINA_OK);
  EXPECT_STRNE(other, buf);
  EXPECT_EQ(lina_shape_bucket(4, 2048, 16, buf, 5), LINA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lina_last_error()).find("needs 23 bytes, buf has 5"),
            std::string::npos)
      << lina_last_error();
  EXPECT_EQ(lina_shape_bucket(4, 2048, 16, nullptr, 64), LINA_INVALID_ARGUMENT);
  // No bucket holds a negative count; a call of no tokens has one.
  EXPECT_EQ(lina_shape_bucket(-1, -1, -1, buf, sizeof buf),
            LINA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lina_last_error()).find("got -1, -1, -1"),
            std::string::npos)
      << lina_last_error();
  EXPECT_EQ(lina_shape_bucket(1, 0, 16, buf, sizeof buf), LINA_OK)
      << lina_last_error();
}

TEST(CApi, BadPresetAndDtypeNameTheProblem) {
  char *text = nullptr;
  EXPECT_EQ(lina_preset_spec("softmax", 64, 64, 4, 4, "bf16", &text),
            LINA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lina_last_error()).find("unknown preset 'softmax'"),
            std::string::npos);
  EXPECT_EQ(lina_preset_spec("gdn", 64, 64, 4, 4, "f64", &text),
            LINA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lina_last_error()).find("dtype must be bf16, f16 or "
                                                "f32, got 'f64'"),
            std::string::npos);
  EXPECT_EQ(lina_preset_spec("gdn", 64, 64, 4, 6, "bf16", &text),
            LINA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lina_last_error()).find("must be a multiple of heads"),
            std::string::npos);
  EXPECT_EQ(text, nullptr);
}

TEST(CApi, MalformedSpecTextIsAnArgumentError) {
  lina_kernel *kernel = nullptr;
  EXPECT_EQ(lina_kernel_create("lina.recurrence @x <decay = none, update = "
                               "delta, key_dim = 64, value_dim = 64, heads = "
                               "1, value_heads = 1, dtype = bf16>",
                               nullptr, 0, &kernel),
            LINA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lina_last_error()).find("update = delta needs beta"),
            std::string::npos)
      << lina_last_error();
  EXPECT_EQ(kernel, nullptr);
  EXPECT_EQ(lina_kernel_create("\x01garbage<<", nullptr, 0, &kernel),
            LINA_INVALID_ARGUMENT);
  EXPECT_EQ(lina_kernel_create(nullptr, nullptr, 0, &kernel),
            LINA_INVALID_ARGUMENT);
}

TEST(CApi, BadScheduleIsAnArgumentError) {
  char *text = nullptr;
  ASSERT_EQ(lina_preset_spec("kda", 128, 128, 2, 2, "bf16", &text), LINA_OK);
  lina_schedule schedule = {128, 128, 4, LINA_STRATEGY_FUSED};
  lina_kernel *kernel = nullptr;
  EXPECT_EQ(lina_kernel_create(text, &schedule, 0, &kernel),
            LINA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lina_last_error()).find("shared memory"),
            std::string::npos)
      << lina_last_error();
  lina_free_string(text);
}

TEST(CApi, NoDriverIsReportedNotFatal) {
  char *text = nullptr;
  ASSERT_EQ(lina_preset_spec("gla", 64, 64, 2, 2, "bf16", &text), LINA_OK);
  lina_kernel *kernel = nullptr;
  lina_status status = lina_kernel_create(text, nullptr, 0, &kernel);
  lina_free_string(text);
  if (status == LINA_OK) {
    lina_kernel_destroy(kernel);
    GTEST_SKIP() << "a GPU is present: the no-driver path cannot be shown";
  }
  EXPECT_EQ(status, LINA_NO_DRIVER) << lina_last_error();
  EXPECT_NE(std::string(lina_last_error()).find("no CUDA driver found"),
            std::string::npos)
      << lina_last_error();
}

TEST(CApi, CreateForShapeChecksItsArguments) {
  char *text = nullptr;
  ASSERT_EQ(lina_preset_spec("gdn", 64, 64, 2, 2, "bf16", &text), LINA_OK);
  lina_kernel *kernel = nullptr;
  EXPECT_EQ(lina_kernel_create_for_shape(text, nullptr, -1, 100, 0, &kernel),
            LINA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lina_last_error()).find("must not be negative"),
            std::string::npos)
      << lina_last_error();
  EXPECT_EQ(lina_kernel_create_for_shape(nullptr, nullptr, 1, 100, 0, &kernel),
            LINA_INVALID_ARGUMENT);
  // A schedule the planner refuses is named before the missing GPU is.
  lina_schedule schedule = {128, 128, 4, LINA_STRATEGY_FUSED};
  char *big = nullptr;
  ASSERT_EQ(lina_preset_spec("kda", 128, 128, 2, 2, "bf16", &big), LINA_OK);
  EXPECT_EQ(lina_kernel_create_for_shape(big, &schedule, 1, 100, 0, &kernel),
            LINA_INVALID_ARGUMENT);
  lina_status status =
      lina_kernel_create_for_shape(text, nullptr, 1, 100, 0, &kernel);
  lina_free_string(text);
  lina_free_string(big);
  if (status == LINA_OK) {
    lina_kernel_destroy(kernel);
    GTEST_SKIP() << "a GPU is present: the no-driver path cannot be shown";
  }
  EXPECT_EQ(status, LINA_NO_DRIVER) << lina_last_error();
}

// A schedule that sets only segments is a schedule: for a rule that cannot
// run in segments the planner's reason comes back, GPU or not.
TEST(CApi, SegmentsForADeltaRuleAreRefusedWithTheReason) {
  char *text = nullptr;
  ASSERT_EQ(lina_preset_spec("gdn", 128, 128, 2, 2, "bf16", &text), LINA_OK);
  lina_schedule schedule = {0, 0, 0, LINA_STRATEGY_DEFAULT,
                            LINA_PREFETCH_DEFAULT, 2};
  lina_kernel *kernel = nullptr;
  EXPECT_EQ(lina_kernel_create_for_shape(text, &schedule, 2, 16384, 0, &kernel),
            LINA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lina_last_error()).find("segments: "),
            std::string::npos)
      << lina_last_error();
  lina_free_string(text);
}

// The mma knob reaches the planner, GPU or not: warpgroup asked for where
// the scan does not cover the spec, or with a layout knob that disagrees
// with its fixed one, the planner's reason comes back.
TEST(CApi, MmaIsAKnobAndItsRefusalsComeBack) {
  struct Case {
    const char *preset;
    int64_t dim, chunkSize;
    const char *dtype, *reason;
  };
  for (const Case &c :
       {Case{"kda", 128, 0, "f32",
             "mma warpgroup: the dtype must be bf16 or f16"},
        Case{"kda", 128, 16, "bf16",
             "mma warpgroup: the schedule must be chunk size 64"}}) {
    SCOPED_TRACE(c.preset);
    char *text = nullptr;
    ASSERT_EQ(lina_preset_spec(c.preset, c.dim, c.dim, 2, 2, c.dtype, &text),
              LINA_OK);
    lina_schedule schedule = {c.chunkSize};
    schedule.mma = LINA_MMA_WARPGROUP;
    lina_kernel *kernel = nullptr;
    EXPECT_EQ(lina_kernel_create_for_shape(text, &schedule, 2, 4096, 0,
                                           &kernel),
              LINA_INVALID_ARGUMENT);
    EXPECT_NE(std::string(lina_last_error()).find(c.reason),
              std::string::npos)
        << lina_last_error();
    lina_free_string(text);
  }
  // A DPLR b decayed by its own per-channel gate has no warpgroup kernels.
  const char *negDecayed =
      "lina.recurrence @x <decay = per_channel, update = dplr, low_rank_b = "
      "neg_decayed_key, key_dim = 128, value_dim = 128, heads = 2, "
      "value_heads = 2, dtype = bf16, initial_state = true, final_state = "
      "true>";
  lina_schedule schedule = {};
  schedule.mma = LINA_MMA_WARPGROUP;
  lina_kernel *kernel = nullptr;
  EXPECT_EQ(
      lina_kernel_create_for_shape(negDecayed, &schedule, 2, 4096, 0, &kernel),
      LINA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lina_last_error())
                .find("(low_rank_b = neg_decayed_key) aside"),
            std::string::npos)
      << lina_last_error();
}

TEST(CApi, NullHandleAndArgs) {
  EXPECT_EQ(lina_kernel_forward(nullptr, nullptr), LINA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lina_last_error()).find("must not be NULL"),
            std::string::npos);
  lina_kernel_destroy(nullptr); // a no-op, like free(NULL)
  lina_schedule schedule;
  EXPECT_EQ(lina_kernel_schedule(nullptr, &schedule), LINA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lina_last_error()).find("lina_kernel_schedule"),
            std::string::npos);
  EXPECT_STREQ(lina_status_name(LINA_NO_DRIVER), "LINA_NO_DRIVER");
}

} // namespace
