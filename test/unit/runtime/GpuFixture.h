//===- GpuFixture.h - Runtime tests that need a GPU -------------*- C++ -*-===//
//
// Part of lina's tests.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TEST_UNIT_RUNTIME_GPUFIXTURE_H
#define LINA_TEST_UNIT_RUNTIME_GPUFIXTURE_H

#include "lina/Runtime/Device.h"
#include "lina/Runtime/Driver.h"

#include "gtest/gtest.h"

namespace lina::test {

/// A test on GPU 0: skipped, and counted as skipped, without a driver or a
/// GPU. A fixture that adds to SetUp calls this one first and returns when
/// it skipped or failed (IsSkipped(), HasFatalFailure()).
class OnGpu : public ::testing::Test {
protected:
  void SetUp() override {
    if (!cuda::Driver::get().available())
      GTEST_SKIP() << cuda::Driver::get().status().message();
    Expected<int> count = cuda::deviceCount();
    ASSERT_TRUE(count.ok()) << count.message();
    if (*count == 0)
      GTEST_SKIP() << "the driver sees no GPU";
    Expected<cuda::Device> device = cuda::queryDevice(0);
    ASSERT_TRUE(device.ok()) << device.message();
    device_ = *device;
  }

  cuda::Device device_;
};

} // namespace lina::test

#endif // LINA_TEST_UNIT_RUNTIME_GPUFIXTURE_H
