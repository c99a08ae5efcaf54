//===- GpuTest.cpp - Compile, load and launch on a real GPU ---------------===//
//
// Part of lina. The whole staged path (NVRTC -> cubin -> module -> kernel ->
// launch) against a CPU result. Skipped, and counted as skipped, without a
// driver, a GPU or NVRTC.
//
//===----------------------------------------------------------------------===//
#include "GpuFixture.h"
#include "TestKernels.h"

#include "lina/Runtime/Device.h"
#include "lina/Runtime/Driver.h"
#include "lina/Runtime/Event.h"
#include "lina/Runtime/Memory.h"
#include "lina/Runtime/Module.h"
#include "lina/Runtime/Nvrtc.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

using namespace lina;
using namespace lina::cuda;
using ::testing::HasSubstr;
using ::testing::StartsWith;

namespace {

class GpuTest : public test::OnGpu {
protected:
  /// Compiles \p source for \p arch and loads it on GPU 0.
  Expected<Module> build(const char *source, const std::string &arch) {
    if (!Nvrtc::get().available())
      return Nvrtc::get().status();
    CompileOptions options;
    options.arch = arch;
    Expected<CompiledKernel> compiled = compileCuda(source, options);
    if (!compiled.ok())
      return compiled.status();
    return Module::load(device_.ordinal, compiled->cubin);
  }
};

#define SKIP_WITHOUT_NVRTC()                                                   \
  do {                                                                         \
    if (!Nvrtc::get().available())                                             \
      GTEST_SKIP() << Nvrtc::get().status().message();                         \
  } while (false)

uint16_t toBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return static_cast<uint16_t>(bits >> 16); // exact for the small integers used
}

TEST_F(GpuTest, DescribesDevice) {
  EXPECT_FALSE(device_.name.empty());
  EXPECT_EQ(device_.arch, "sm_" + std::to_string(device_.computeMajor) +
                              std::to_string(device_.computeMinor));
  EXPECT_GE(device_.computeMajor, 7);
  EXPECT_GT(device_.smCount, 0);
  EXPECT_EQ(device_.warpSize, 32);
  EXPECT_GE(device_.sharedMemoryPerBlockOptin, device_.sharedMemoryPerBlock);
  EXPECT_GE(device_.sharedMemoryPerBlock, 48 * 1024);
  EXPECT_GT(device_.driverVersion, 0);
  if (device_.computeMajor >= 9) {
    EXPECT_EQ(device_.archSpecific(), device_.arch + "a");
  }
  std::printf("device 0: %s, %s, %d SMs, %d bytes optin shared memory, "
              "driver %d\n",
              device_.name.c_str(), device_.arch.c_str(), device_.smCount,
              device_.sharedMemoryPerBlockOptin, device_.driverVersion);
}

class MmaOnGpuTest : public GpuTest,
                     public ::testing::WithParamInterface<std::string> {};

TEST_P(MmaOnGpuTest, MatchesCpuProduct) {
  SKIP_WITHOUT_NVRTC();
  if (device_.computeMajor < 8)
    GTEST_SKIP() << "bf16 mma.sync needs sm_80";
  std::string arch = GetParam() == "plain"      ? device_.arch
                     : GetParam() == "specific" ? device_.archSpecific()
                                                : "compute_80";
  Expected<Module> module = build(test::kMmaKernelSource, arch);
  ASSERT_TRUE(module.ok()) << module.message();
  Expected<Kernel> kernel = module->kernel("mma_bf16_16x8x16");
  ASSERT_TRUE(kernel.ok()) << kernel.message();

  std::vector<float> a(16 * 16), b(16 * 8), expected(16 * 8, 0.f);
  std::vector<uint16_t> aBits(a.size()), bBits(b.size());
  for (size_t i = 0; i < a.size(); ++i)
    aBits[i] = toBf16(a[i] = static_cast<float>(int(i * 7 % 11) - 5));
  for (size_t i = 0; i < b.size(); ++i)
    bBits[i] = toBf16(b[i] = static_cast<float>(int(i * 5 % 7) - 3));
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n)
      for (int k = 0; k < 16; ++k)
        expected[m * 8 + n] += a[m * 16 + k] * b[k * 8 + n];

  Expected<DeviceBuffer> aDev = DeviceBuffer::allocate(0, aBits.size() * 2);
  Expected<DeviceBuffer> bDev = DeviceBuffer::allocate(0, bBits.size() * 2);
  Expected<DeviceBuffer> dDev = DeviceBuffer::allocate(0, expected.size() * 4);
  ASSERT_TRUE(aDev.ok() && bDev.ok() && dDev.ok()) << aDev.message();
  ASSERT_TRUE(aDev->copyFromHost(aBits.data(), aBits.size() * 2).ok());
  ASSERT_TRUE(bDev->copyFromHost(bBits.data(), bBits.size() * 2).ok());
  // Poison the output so a kernel that writes nothing cannot pass.
  std::vector<float> d(expected.size(), -12345.f);
  ASSERT_TRUE(dDev->copyFromHost(d.data(), d.size() * 4).ok());

  LaunchConfig config;
  config.block.x = 32;
  Status launched = kernel->launchWith(config, aDev->pointer(), bDev->pointer(),
                                       dDev->pointer());
  ASSERT_TRUE(launched.ok()) << launched.message();
  Status synced = synchronizeDevice(0);
  ASSERT_TRUE(synced.ok()) << synced.message();
  ASSERT_TRUE(dDev->copyToHost(d.data(), d.size() * 4).ok());
  for (size_t i = 0; i < d.size(); ++i)
    EXPECT_EQ(d[i], expected[i]) << "D[" << i / 8 << "][" << i % 8 << "]";
}

INSTANTIATE_TEST_SUITE_P(Targets, MmaOnGpuTest,
                         ::testing::Values("plain", "specific", "ptx"));

TEST_F(GpuTest, LargeSharedMemoryOptsIn) {
  SKIP_WITHOUT_NVRTC();
  Expected<Module> module = build(test::kSharedSumKernelSource, device_.arch);
  ASSERT_TRUE(module.ok()) << module.message();
  Expected<Kernel> kernel = module->kernel("shared_sum");
  ASSERT_TRUE(kernel.ok()) << kernel.message();

  // 96 KiB: twice what a kernel gets without opting in.
  int n = 96 * 1024 / 4;
  ASSERT_LE(n * 4, device_.sharedMemoryPerBlockOptin);
  std::vector<float> in(n, 0.5f);
  Expected<DeviceBuffer> inDev = DeviceBuffer::allocate(0, n * 4);
  Expected<DeviceBuffer> outDev = DeviceBuffer::allocate(0, 4);
  ASSERT_TRUE(inDev.ok() && outDev.ok());
  ASSERT_TRUE(inDev->copyFromHost(in.data(), n * 4).ok());

  Expected<Event> start = Event::create(0), end = Event::create(0);
  ASSERT_TRUE(start.ok() && end.ok()) << start.message();
  LaunchConfig config;
  config.block.x = 256;
  config.sharedMemoryBytes = n * 4;
  ASSERT_TRUE(start->record().ok());
  Status launched =
      kernel->launchWith(config, inDev->pointer(), n, outDev->pointer());
  ASSERT_TRUE(launched.ok()) << launched.message();
  ASSERT_TRUE(end->record().ok());
  Expected<float> ms = Event::elapsedMilliseconds(*start, *end);
  ASSERT_TRUE(ms.ok()) << ms.message();
  EXPECT_GE(*ms, 0.f);

  float total = 0;
  ASSERT_TRUE(outDev->copyToHost(&total, 4).ok());
  EXPECT_EQ(total, 0.5f * n);
  Expected<int> registers = kernel->numRegisters();
  ASSERT_TRUE(registers.ok()) << registers.message();
  EXPECT_GT(*registers, 0);
}

TEST_F(GpuTest, BadImageErrorNamesTheCall) {
  std::string junk = "\x7f"
                     "ELF this is not a cubin";
  Expected<Module> module = Module::load(0, junk);
  ASSERT_FALSE(module.ok());
  EXPECT_EQ(module.status().code(), StatusCode::DriverError);
  EXPECT_THAT(
      module.message(),
      StartsWith("cuModuleLoadData failed: CUDA_ERROR_INVALID_IMAGE ("));
}

TEST_F(GpuTest, MissingKernelNamesTheKernel) {
  SKIP_WITHOUT_NVRTC();
  Expected<Module> module = build(test::kSharedSumKernelSource, device_.arch);
  ASSERT_TRUE(module.ok()) << module.message();
  Expected<Kernel> kernel = module->kernel("no_such_kernel");
  ASSERT_FALSE(kernel.ok());
  EXPECT_THAT(kernel.message(),
              StartsWith("cuModuleGetFunction failed: CUDA_ERROR_NOT_FOUND ("));
  EXPECT_THAT(kernel.message(), HasSubstr("'no_such_kernel'"));
}

TEST_F(GpuTest, BadLaunchNamesTheKernel) {
  SKIP_WITHOUT_NVRTC();
  Expected<Module> module = build(test::kSharedSumKernelSource, device_.arch);
  ASSERT_TRUE(module.ok()) << module.message();
  Expected<Kernel> kernel = module->kernel("shared_sum");
  ASSERT_TRUE(kernel.ok()) << kernel.message();
  LaunchConfig config;
  config.block.x = 4096; // over every GPU's 1024-thread limit
  CUdeviceptr none = 0;
  int n = 0;
  Status launched = kernel->launchWith(config, none, n, none);
  ASSERT_FALSE(launched.ok());
  EXPECT_THAT(launched.message(), StartsWith("cuLaunchKernel failed: CUDA_"));
  EXPECT_THAT(launched.message(), HasSubstr("kernel shared_sum"));
  EXPECT_THAT(launched.message(), HasSubstr("block 4096x1x1"));
}

} // namespace
