//===- DecodeCApiTest.cpp - The decode C and C++ API without a GPU ------===//
//
// Part of lina. Through liblina.so: bad specs and knobs are argument errors
// that say what to change, a missing driver is a status, NULLs are refused,
// and the C++ layer turns each into a lina::Error.
//
//===----------------------------------------------------------------------===//
#include "lina/lina.h"

#include <gtest/gtest.h>

#include <string>

namespace {

std::string presetText(const char *preset, const char *dtype = "bf16") {
  char *text = nullptr;
  EXPECT_EQ(lina_preset_spec(preset, 128, 128, 4, 8, dtype, &text), LINA_OK)
      << lina_last_error();
  std::string spec(text ? text : "");
  lina_free_string(text);
  return spec;
}

TEST(DecodeCApi, VarlenSpecIsRefusedWithTheFix) {
  std::string spec = presetText("gdn");
  spec.insert(spec.rfind('>'), ", varlen = true");
  lina_decode_kernel *kernel = nullptr;
  EXPECT_EQ(lina_decode_create(spec.c_str(), nullptr, 0, &kernel),
            LINA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lina_last_error()).find("set varlen = false"),
            std::string::npos)
      << lina_last_error();
  EXPECT_EQ(kernel, nullptr);
}

TEST(DecodeCApi, BadKnobsNameTheChoices) {
  std::string spec = presetText("kda");
  lina_decode_schedule schedule = {32, 4};
  lina_decode_kernel *kernel = nullptr;
  EXPECT_EQ(lina_decode_create(spec.c_str(), &schedule, 0, &kernel),
            LINA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lina_last_error()).find("choose one of 4, 8, 16"),
            std::string::npos)
      << lina_last_error();
  schedule = {0, 12};
  EXPECT_EQ(lina_decode_create(spec.c_str(), &schedule, 0, &kernel),
            LINA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lina_last_error()).find("warps per CTA must be 1 to 8"),
            std::string::npos);
}

TEST(DecodeCApi, MalformedTextAndNulls) {
  lina_decode_kernel *kernel = nullptr;
  EXPECT_EQ(lina_decode_create("\x01garbage<<", nullptr, 0, &kernel),
            LINA_INVALID_ARGUMENT);
  EXPECT_EQ(lina_decode_create(nullptr, nullptr, 0, &kernel),
            LINA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lina_last_error()).find("must not be NULL"),
            std::string::npos);
  EXPECT_EQ(lina_decode_forward(nullptr, nullptr), LINA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lina_last_error()).find("lina_decode_forward"),
            std::string::npos);
  EXPECT_EQ(lina_decode_warp_columns(nullptr, 1), 0);
  lina_decode_destroy(nullptr); // a no-op, like free(NULL)
}

TEST(DecodeCApi, NoDriverIsReportedNotFatal) {
  std::string spec = presetText("rwkv7", "f32");
  lina_decode_kernel *kernel = nullptr;
  lina_status status = lina_decode_create(spec.c_str(), nullptr, 0, &kernel);
  if (status == LINA_OK) {
    lina_decode_destroy(kernel);
    GTEST_SKIP() << "a GPU is present: the no-driver path cannot be shown";
  }
  EXPECT_EQ(status, LINA_NO_DRIVER) << lina_last_error();
  EXPECT_NE(std::string(lina_last_error()).find("no CUDA driver found"),
            std::string::npos)
      << lina_last_error();
}

TEST(DecodeCppApi, ErrorsAreExceptionsWithTheStatus) {
  try {
    lina::DecodeKernel::fromPreset("gdn", 128, 30, 4, 4, "bf16");
    FAIL() << "value_dim 30 was accepted";
  } catch (const lina::Error &e) {
    EXPECT_EQ(e.status(), LINA_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("must be a multiple of 4"),
              std::string::npos)
        << e.what();
  }
  lina::DecodeOptions options;
  options.warpColumns = 16;
  try {
    lina::DecodeKernel kernel =
        lina::DecodeKernel::fromPreset("kda", 128, 128, 4, 8, "bf16", options);
    EXPECT_EQ(kernel.warpColumns(256), 16); // a GPU is present
  } catch (const lina::Error &e) {
    EXPECT_EQ(e.status(), LINA_NO_DRIVER) << e.what();
  }
}

} // namespace
