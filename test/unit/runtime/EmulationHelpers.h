//===- EmulationHelpers.h - Kernels built and run on the emulated device -===//
//
// Part of lina. What the emulated device's tests share: the process runs
// emulated from its first driver call, a kernel's source is built after a
// device library and loaded, launched in a thread order, buffers go to and
// from the device, and inputs are rounded as the tensor cores read them.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TEST_UNIT_RUNTIME_EMULATIONHELPERS_H
#define LINA_TEST_UNIT_RUNTIME_EMULATIONHELPERS_H

#include "Prelude.h"
#include "lina/Reference/DeviceCheck.h"
#include "lina/Runtime/Memory.h"
#include "lina/Runtime/Module.h"
#include "lina/Runtime/Nvrtc.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace lina::test {

// Before any test reaches the driver (static initialisation precedes main).
inline const bool kEmulated = [] {
  setenv("LINA_EMULATE_GPU", "sm_90", 1);
  return true;
}();

/// The arch and the CTA size the device library is compiled for: the
/// generated kernels' sm_90 at 128 threads, or the Hopper scans' sm_90a at
/// 256 (two warpgroups, which their code asserts).
struct Target {
  const char *arch = "sm_90";
  int threads = 128;
};
inline constexpr Target kHopper{"sm_90a", 256};

/// `kernels` after a device library (the chunk kernels' by default),
/// compiled for `target` and loaded on the emulated device.
inline Expected<cuda::Module> build(const std::string &kernels,
                                    const char *library = cuda::preludeSource(),
                                    Target target = {}) {
  const std::string source = std::string(library) + "\n" + kernels;
  cuda::CompileOptions options;
  options.arch = target.arch;
  options.flags = {"-DLINA_THREADS=" + std::to_string(target.threads)};
  Expected<cuda::CompiledKernel> compiled = cuda::compileCuda(source, options);
  if (!compiled.ok())
    return compiled.status();
  return cuda::Module::load(0, compiled->cubin);
}

/// A kernel of `kernels` and the module that holds it.
struct Loaded {
  std::optional<cuda::Module> module;
  cuda::Kernel kernel;
  /// One CTA of 128 threads.
  cuda::LaunchConfig config;
};

/// Loads `name` from `kernels` (compiled for `target`) into `loaded` (a
/// test failure where a step fails: call it in ASSERT_NO_FATAL_FAILURE).
inline void load(const char *kernels, const char *name, Loaded &loaded,
                 Target target = {}) {
  Expected<cuda::Module> built = build(kernels, cuda::preludeSource(), target);
  ASSERT_TRUE(built.ok()) << built.message();
  loaded.module.emplace(std::move(*built));
  Expected<cuda::Kernel> found = loaded.module->kernel(name);
  ASSERT_TRUE(found.ok()) << found.message();
  loaded.kernel = *found;
  loaded.config.block.x = 128;
}

/// Launches `kernel` with each step's threads in `order` ("forward" or
/// "reverse": a race gives other results in the other order).
template <typename... Args>
Status launchInOrder(const cuda::Kernel &kernel,
                     const cuda::LaunchConfig &config, const char *order,
                     const Args &...args) {
  setenv("LINA_EMULATION_ORDER", order, 1);
  Status launched = kernel.launchWith(config, args...);
  unsetenv("LINA_EMULATION_ORDER");
  return launched;
}

/// `values` in a new device buffer (floats where a braced list gives them).
template <typename T = float>
Expected<cuda::DeviceBuffer> upload(const std::vector<T> &values) {
  Expected<cuda::DeviceBuffer> buffer =
      cuda::DeviceBuffer::allocate(0, values.size() * sizeof(T));
  if (!buffer.ok())
    return buffer.status();
  Status copied =
      buffer->copyFromHost(values.data(), values.size() * sizeof(T));
  if (!copied.ok())
    return copied;
  return buffer;
}

/// `n` inputs drawn uniformly from [-1, 1) by `rng`, in order.
inline std::vector<float> uniformValues(size_t n, std::mt19937 &rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(n);
  for (float &x : values)
    x = uniform(rng);
  return values;
}

/// The first `n` floats of `buffer` (NaN where the copy fails, which the
/// caller's comparison then reports).
inline std::vector<float> download(const cuda::DeviceBuffer &buffer, size_t n) {
  std::vector<float> values(n, NAN);
  Status copied = buffer.copyToHost(values.data(), n * sizeof(float));
  EXPECT_TRUE(copied.ok()) << copied.message();
  return values;
}

/// `x` as the tensor cores read it: rounded to bf16 (the reference's
/// conversions), widened for a float64 sum.
inline double asBf16(float x) {
  return reference::bf16ToFloat(reference::floatToBf16(x));
}

} // namespace lina::test

#endif // LINA_TEST_UNIT_RUNTIME_EMULATIONHELPERS_H
