//===- Module.cpp - A loaded cubin and the kernels in it ------------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Runtime/Module.h"

#include "lina/Runtime/Device.h"
#include "lina/Runtime/Driver.h"

#include <utility>

namespace lina::cuda {

/// Dynamic shared memory a kernel may use without opting in.
static constexpr unsigned kDefaultSharedMemoryLimit = 48 * 1024;

/// "grid 4x1x1, block 128x1x1, 0 bytes of shared memory".
static std::string describe(const LaunchConfig &config) {
  auto dims = [](const Dim3 &d) {
    return std::to_string(d.x) + "x" + std::to_string(d.y) + "x" +
           std::to_string(d.z);
  };
  return "grid " + dims(config.grid) + ", block " + dims(config.block) + ", " +
         std::to_string(config.sharedMemoryBytes) + " bytes of shared memory";
}

Expected<int> Kernel::attribute(CUfunction_attribute attribute) const {
  int value = 0;
  LINA_RETURN_IF_ERROR(
      LINA_CU(cuFuncGetAttribute(&value, attribute, function_)));
  return value;
}

Status Kernel::setAttribute(CUfunction_attribute attribute, int value) const {
  return LINA_CU(cuFuncSetAttribute(function_, attribute, value));
}

Status Kernel::launch(const LaunchConfig &config, void **args) const {
  if (!function_)
    return Status::error(StatusCode::InvalidArgument,
                         "launch of an empty Kernel (look it up with "
                         "Module::kernel first)");
  if (config.sharedMemoryBytes > kDefaultSharedMemoryLimit) {
    LINA_RETURN_IF_ERROR(
        setAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                     static_cast<int>(config.sharedMemoryBytes)));
    // All of L1 as shared memory: lina's kernels are bound by how many CTAs
    // fit in it, and the driver's default split may leave room for fewer.
    LINA_RETURN_IF_ERROR(
        setAttribute(CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 100));
  }
  Status launched = LINA_CU(
      cuLaunchKernel(function_, config.grid.x, config.grid.y, config.grid.z,
                     config.block.x, config.block.y, config.block.z,
                     config.sharedMemoryBytes, config.stream, args, nullptr));
  if (launched.ok())
    return launched;
  // The driver's message says what went wrong but not to which kernel.
  return Status::error(launched.code(),
                       launched.message() + " (kernel " + name_ + ", " +
                           describe(config) + ")",
                       launched.apiResult());
}

Expected<Module> Module::load(int deviceOrdinal, const std::string &image) {
  if (image.empty())
    return Status::error(StatusCode::InvalidArgument,
                         "cannot load an empty module image");
  LINA_RETURN_IF_ERROR(makeCurrent(deviceOrdinal));
  CUmodule module = nullptr;
  LINA_RETURN_IF_ERROR(LINA_CU(cuModuleLoadData(&module, image.c_str())));
  return Module(module, deviceOrdinal);
}

Module::Module(Module &&other) noexcept
    : module_(std::exchange(other.module_, nullptr)),
      deviceOrdinal_(other.deviceOrdinal_) {}

Module &Module::operator=(Module &&other) noexcept {
  // Our old module, if any, is unloaded when \p other is destroyed.
  std::swap(module_, other.module_);
  std::swap(deviceOrdinal_, other.deviceOrdinal_);
  return *this;
}

Module::~Module() {
  // Nothing to report to from a destructor; a failed unload only leaks the
  // module until the context goes away.
  if (module_)
    (void)Driver::get().cuModuleUnload(module_);
}

Expected<Kernel> Module::kernel(const std::string &name) const {
  CUfunction function = nullptr;
  Status found = LINA_CU(cuModuleGetFunction(&function, module_, name.c_str()));
  if (!found.ok())
    return Status::error(found.code(),
                         found.message() + " (looking up kernel '" + name +
                             "'; is it declared extern \"C\"?)",
                         found.apiResult());
  return Kernel(function, name, deviceOrdinal_);
}

} // namespace lina::cuda
