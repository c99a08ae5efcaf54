//===- DriverTest.cpp - The runtime on a machine without a CUDA driver ----===//
//
// Part of lina. Everything here must behave the same on a CPU-only CI box:
// a value carrying one clear message, never a crash. Skipped where a driver
// is installed (GpuTest.cpp covers that case).
//
//===----------------------------------------------------------------------===//
#include "lina/Runtime/Driver.h"
#include "lina/Runtime/Device.h"
#include "lina/Runtime/Event.h"
#include "lina/Runtime/Memory.h"
#include "lina/Runtime/Module.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <dlfcn.h>

using namespace lina;
using namespace lina::cuda;

namespace {

/// dlopen's own complaint about libcuda.so.1, or "" when it loads. Asked
/// independently of Driver so a broken loader cannot skip its own test.
std::string libcudaLoadError() {
  void *handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle) {
    dlclose(handle);
    return "";
  }
  const char *error = dlerror();
  return error ? error : "unknown dlopen error";
}

class NoDriverTest : public ::testing::Test {
protected:
  void SetUp() override {
    dlerror_ = libcudaLoadError();
    if (dlerror_.empty())
      GTEST_SKIP() << "libcuda.so.1 loads on this machine";
    expected_ =
        "no CUDA driver found (libcuda.so.1 could not be loaded: " + dlerror_ +
        "); lina needs an NVIDIA GPU and driver to run kernels";
  }

  void expectNoDriver(const Status &status, const char *what) {
    EXPECT_FALSE(status.ok()) << what;
    EXPECT_EQ(status.code(), StatusCode::NoDriver) << what;
    EXPECT_EQ(status.message(), expected_) << what;
  }

  std::string dlerror_;
  std::string expected_;
};

TEST_F(NoDriverTest, LoadFailureIsTheExactMessage) {
  EXPECT_FALSE(Driver::get().available());
  EXPECT_EQ(Driver::get().libraryName(), "");
  EXPECT_THAT(dlerror_, ::testing::HasSubstr("libcuda.so.1"));
  expectNoDriver(Driver::get().status(), "Driver::status");
}

TEST_F(NoDriverTest, EveryCallReportsTheMissingDriver) {
  expectNoDriver(queryDevice(0).status(), "queryDevice");
  expectNoDriver(deviceCount().status(), "deviceCount");
  expectNoDriver(makeCurrent(0), "makeCurrent");
  expectNoDriver(synchronizeDevice(0), "synchronizeDevice");
  expectNoDriver(synchronizeStream(nullptr), "synchronizeStream");
  expectNoDriver(Module::load(0, "\x7f"
                                 "ELF")
                     .status(),
                 "Module::load");
  expectNoDriver(DeviceBuffer::allocate(0, 1024).status(),
                 "DeviceBuffer::allocate");
  expectNoDriver(Event::create(0).status(), "Event::create");
  // Raw driver calls through the macro, even ones that need no context.
  int version = 0;
  expectNoDriver(LINA_CU(cuDriverGetVersion(&version)), "cuDriverGetVersion");
  expectNoDriver(LINA_CU(cuCtxSynchronize()), "cuCtxSynchronize");
  expectNoDriver(
      Kernel(nullptr, "k").attribute(CU_FUNC_ATTRIBUTE_NUM_REGS).status(),
      "Kernel::attribute");
}

TEST(DriverTest, EmptyKernelLaunchIsAnArgumentError) {
  // Checked before the driver is involved, so the same with or without one.
  Status launched = Kernel().launch(LaunchConfig(), nullptr);
  EXPECT_EQ(launched.code(), StatusCode::InvalidArgument);
  EXPECT_THAT(launched.message(), ::testing::HasSubstr("empty Kernel"));
}

// A copy that would run past a buffer's end, whether by its size or by its
// offset (runOnDevice's inputs off a 16-byte boundary), is refused before
// the driver is called.
TEST(DriverTest, CopiesPastABuffersEndAreRefused) {
  DeviceBuffer empty;
  char byte = 0;
  Status tooMany = empty.copyFromHost(&byte, 1);
  EXPECT_FALSE(tooMany.ok());
  EXPECT_THAT(tooMany.message(),
              ::testing::HasSubstr("a copy to the device of 1 bytes does not "
                                   "fit a buffer of 0 bytes"));
  Status offset = empty.copyFromHost(&byte, 0, 1);
  EXPECT_FALSE(offset.ok());
  EXPECT_THAT(offset.message(),
              ::testing::HasSubstr("a copy to the device at offset 1 of 0 "
                                   "bytes does not fit a buffer of 0 bytes"));
  Status wraps = empty.copyFromHost(&byte, 1, ~size_t(0));
  EXPECT_FALSE(wraps.ok());
}

TEST(DriverTest, SuccessIsOkWithOrWithoutDriver) {
  EXPECT_TRUE(Driver::get().check(CUDA_SUCCESS, "cuInit").ok());
}

TEST(DriverTest, NoDriverMessageNamesTheLibraryAndTheNeed) {
  EXPECT_EQ(noDriverMessage("why"),
            "no CUDA driver found (libcuda.so.1 could not be loaded: why); "
            "lina needs an NVIDIA GPU and driver to run kernels");
}

} // namespace
