//===- Module.h - A loaded cubin and the kernels in it ----------*- C++ -*-===//
//
// Part of lina. The last two stages of compiled -> loaded -> kernel -> launch:
// a Module owns a cubin (or PTX) loaded into a device's primary context, and a
// Kernel is one __global__ function in it, launched on the caller's stream.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_RUNTIME_MODULE_H
#define LINA_RUNTIME_MODULE_H

#include "lina/Runtime/CudaApi.h"
#include "lina/Runtime/Status.h"

#include <string>
#include <utility>

namespace lina::cuda {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

/// Where and how wide a launch is.
struct LaunchConfig {
  Dim3 grid;
  Dim3 block;
  /// Dynamic shared memory. Above 48 KiB the launch opts the kernel in first.
  unsigned sharedMemoryBytes = 0;
  /// The caller's stream; null is the legacy default stream.
  CUstream stream = nullptr;
};

/// One kernel of a Module. A plain handle: valid while its Module lives.
class Kernel {
public:
  Kernel() = default;
  Kernel(CUfunction function, std::string name, int deviceOrdinal = 0)
      : function_(function), name_(std::move(name)),
        deviceOrdinal_(deviceOrdinal) {}

  CUfunction handle() const { return function_; }
  /// The name it was looked up by (the kernel's extern "C" name).
  const std::string &name() const { return name_; }
  /// The GPU whose module holds it.
  int deviceOrdinal() const { return deviceOrdinal_; }

  Expected<int> attribute(CUfunction_attribute attribute) const;
  Status setAttribute(CUfunction_attribute attribute, int value) const;
  /// Registers per thread, as ptxas allocated them.
  Expected<int> numRegisters() const {
    return attribute(CU_FUNC_ATTRIBUTE_NUM_REGS);
  }

  /// Launches with \p args, an array of pointers to each parameter's value
  /// (the cuLaunchKernel convention). Asynchronous: a fault inside the kernel
  /// shows up at the next synchronizing call. The device's primary context
  /// must be current on the calling thread: Module::load makes it so on the
  /// loading thread; other threads call makeCurrent(deviceOrdinal()) once.
  /// (Not done here, so a launch never switches the caller's device.)
  Status launch(const LaunchConfig &config, void **args) const;

  /// Launches with the parameters given by value, in the kernel's order; each
  /// must have the exact type the kernel declares (no conversions happen).
  template <typename... Args>
  Status launchWith(const LaunchConfig &config, const Args &...args) const {
    // One extra slot so that a kernel without parameters gets a valid array.
    void *pointers[sizeof...(Args) + 1] = {
        const_cast<void *>(static_cast<const void *>(&args))...};
    return launch(config, pointers);
  }

private:
  CUfunction function_ = nullptr;
  std::string name_;
  int deviceOrdinal_ = 0;
};

/// A cubin or PTX image loaded on one GPU; unloaded when destroyed.
class Module {
public:
  /// Makes GPU \p deviceOrdinal's primary context current on this thread and
  /// loads \p image into it. \p image is a cubin, or PTX text that the driver
  /// JIT-compiles (std::string keeps the NUL it needs after the text).
  static Expected<Module> load(int deviceOrdinal, const std::string &image);

  Module(Module &&other) noexcept;
  Module &operator=(Module &&other) noexcept;
  Module(const Module &) = delete;
  Module &operator=(const Module &) = delete;
  ~Module();

  /// The kernel named \p name (its extern "C" name, or the mangled one).
  Expected<Kernel> kernel(const std::string &name) const;

  CUmodule handle() const { return module_; }
  int deviceOrdinal() const { return deviceOrdinal_; }

private:
  Module(CUmodule module, int deviceOrdinal)
      : module_(module), deviceOrdinal_(deviceOrdinal) {}

  CUmodule module_ = nullptr;
  int deviceOrdinal_ = 0;
};

} // namespace lina::cuda

#endif // LINA_RUNTIME_MODULE_H
