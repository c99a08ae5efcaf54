//===- StatusTest.cpp - Status and Expected -------------------------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Runtime/Status.h"

#include "gtest/gtest.h"

#include <memory>

using namespace lina;

namespace {

Status failIf(bool fail) {
  if (fail)
    return Status::error(StatusCode::DriverError, "boom", 42);
  return Status();
}

Expected<int> propagate(bool fail) {
  LINA_RETURN_IF_ERROR(failIf(fail));
  return 7;
}

TEST(StatusTest, DefaultIsSuccess) {
  Status ok;
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.code(), StatusCode::Ok);
  EXPECT_EQ(ok.message(), "");
}

TEST(StatusTest, ErrorKeepsCodeMessageAndApiResult) {
  Status error = failIf(true);
  EXPECT_FALSE(error.ok());
  EXPECT_EQ(error.code(), StatusCode::DriverError);
  EXPECT_EQ(error.message(), "boom");
  EXPECT_EQ(error.apiResult(), 42);
  EXPECT_STREQ(statusCodeName(error.code()), "DriverError");
}

TEST(ExpectedTest, HoldsValueOrError) {
  Expected<int> value = propagate(false);
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, 7);
  EXPECT_TRUE(value.status().ok());

  Expected<int> error = propagate(true);
  ASSERT_FALSE(error.ok());
  EXPECT_EQ(error.message(), "boom");
  EXPECT_EQ(error.status().apiResult(), 42);
}

TEST(ExpectedTest, MoveOnlyValues) {
  Expected<std::unique_ptr<int>> owned(std::make_unique<int>(3));
  ASSERT_TRUE(owned.ok());
  std::unique_ptr<int> taken = std::move(owned).value();
  EXPECT_EQ(*taken, 3);
}

TEST(ExpectedTest, SuccessStatusWithoutValueIsAnError) {
  Expected<int> odd{Status()};
  EXPECT_FALSE(odd.ok());
  EXPECT_EQ(odd.status().code(), StatusCode::InvalidArgument);
}

} // namespace
