//===- BackwardCApiTest.cpp - The backward C API without a GPU ----------===//
//
// Part of lina. Through liblina.so: NULLs and bad specs are argument errors,
// a forward-only schedule knob is refused by name, a schedule the planner
// refuses is named before the missing GPU is, and a missing driver is the
// same status as for the forward.
//
//===----------------------------------------------------------------------===//
#include "lina/lina_c.h"

#include <gtest/gtest.h>

#include <string>

namespace {

std::string presetText(const char *preset, int64_t dim = 64) {
  char *text = nullptr;
  EXPECT_EQ(lina_preset_spec(preset, dim, dim, 2, 2, "bf16", &text), LINA_OK)
      << lina_last_error();
  std::string spec(text ? text : "");
  lina_free_string(text);
  return spec;
}

bool errorHas(const char *text) {
  return std::string(lina_last_error()).find(text) != std::string::npos;
}

TEST(BackwardCApi, NullsAreArgumentErrors) {
  lina_backward_kernel *kernel = nullptr;
  EXPECT_EQ(lina_backward_create(nullptr, nullptr, 0, &kernel),
            LINA_INVALID_ARGUMENT);
  EXPECT_TRUE(errorHas("lina_backward_create: spec_text and out must not be "
                       "NULL"))
      << lina_last_error();
  EXPECT_EQ(
      lina_backward_create(presetText("gdn").c_str(), nullptr, 0, nullptr),
      LINA_INVALID_ARGUMENT);
  EXPECT_EQ(lina_backward_run(nullptr, nullptr), LINA_INVALID_ARGUMENT);
  EXPECT_TRUE(errorHas("lina_backward_run: kernel and args must not be NULL"))
      << lina_last_error();
  lina_backward_destroy(nullptr); // a no-op, like free(NULL)
}

TEST(BackwardCApi, MalformedSpecIsAnArgumentError) {
  lina_backward_kernel *kernel = nullptr;
  EXPECT_EQ(lina_backward_create("\x01garbage<<", nullptr, 0, &kernel),
            LINA_INVALID_ARGUMENT);
  EXPECT_EQ(kernel, nullptr);
  EXPECT_EQ(lina_backward_create("lina.recurrence @x <decay = none, update = "
                                 "delta, key_dim = 64, value_dim = 64, heads "
                                 "= 1, value_heads = 1, dtype = bf16>",
                                 nullptr, 0, &kernel),
            LINA_INVALID_ARGUMENT);
  EXPECT_TRUE(errorHas("update = delta needs beta")) << lina_last_error();
}

// The backward has three knobs; each of the forward's others is named, so
// that a caller handing over its forward schedule learns what to clear.
TEST(BackwardCApi, ForwardOnlyKnobsAreRefusedByName) {
  std::string spec = presetText("kda");
  struct Case {
    lina_schedule schedule;
    const char *knob;
  };
  for (const Case &c :
       {Case{{0, 0, 0, LINA_STRATEGY_SPLIT}, "'strategy'"},
        Case{{0, 0, 0, LINA_STRATEGY_DEFAULT, LINA_PREFETCH_ON}, "'prefetch'"},
        Case{{0, 0, 0, LINA_STRATEGY_DEFAULT, LINA_PREFETCH_DEFAULT, 2},
             "'segments'"},
        Case{[] {
               lina_schedule s = {};
               s.mma = LINA_MMA_WARP;
               return s;
             }(),
             "'mma'"}}) {
    SCOPED_TRACE(c.knob);
    lina_backward_kernel *kernel = nullptr;
    EXPECT_EQ(lina_backward_create(spec.c_str(), &c.schedule, 0, &kernel),
              LINA_INVALID_ARGUMENT);
    EXPECT_TRUE(errorHas(c.knob)) << lina_last_error();
    EXPECT_TRUE(errorHas("set strategy, prefetch, segments and mma to 0"))
        << lina_last_error();
    EXPECT_EQ(kernel, nullptr);
  }
  lina_schedule negative = {-32, 0, 0};
  lina_backward_kernel *kernel = nullptr;
  EXPECT_EQ(lina_backward_create(spec.c_str(), &negative, 0, &kernel),
            LINA_INVALID_ARGUMENT);
  EXPECT_TRUE(errorHas("must not be negative (0 is the default), got -32"))
      << lina_last_error();
}

// The planner runs before the driver is needed: its refusal comes back
// whether or not a GPU is present.
TEST(BackwardCApi, APlannerRefusalIsNamedBeforeTheDriver) {
  std::string spec = presetText("gdn");
  lina_schedule schedule = {0, 48, 0}; // 48 does not divide value_dim 64
  lina_backward_kernel *kernel = nullptr;
  EXPECT_EQ(lina_backward_create(spec.c_str(), &schedule, 0, &kernel),
            LINA_INVALID_ARGUMENT);
  EXPECT_TRUE(errorHas("tile-v (48) must be a multiple of 8 dividing "
                       "value_dim (64)"))
      << lina_last_error();
  EXPECT_EQ(kernel, nullptr);
}

TEST(BackwardCApi, NoDriverIsReportedNotFatal) {
  std::string spec = presetText("gdn");
  lina_schedule knobs = {0, 0, 0}; // the backward's knobs alone are fine
  lina_backward_kernel *kernel = nullptr;
  lina_status status = lina_backward_create(spec.c_str(), &knobs, 0, &kernel);
  if (status == LINA_OK) {
    lina_backward_destroy(kernel);
    GTEST_SKIP() << "a GPU is present: the no-driver path cannot be shown";
  }
  EXPECT_EQ(status, LINA_NO_DRIVER) << lina_last_error();
  EXPECT_TRUE(errorHas("no CUDA driver found")) << lina_last_error();
  EXPECT_EQ(kernel, nullptr);
}

} // namespace
