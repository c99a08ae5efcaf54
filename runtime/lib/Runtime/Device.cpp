//===- Device.cpp - What the GPU at hand can do ---------------------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Runtime/Device.h"

#include "lina/Runtime/Driver.h"

#include <map>
#include <mutex>

namespace lina::cuda {

std::string Device::archSpecific() const {
  return computeMajor >= 9 ? arch + "a" : arch;
}

Expected<int> deviceCount() {
  int count = 0;
  LINA_RETURN_IF_ERROR(LINA_CU(cuDeviceGetCount(&count)));
  return count;
}

Expected<Device> queryDevice(int ordinal) {
  Device device;
  device.ordinal = ordinal;
  CUdevice handle = 0;
  LINA_RETURN_IF_ERROR(LINA_CU(cuDeviceGet(&handle, ordinal)));

  char name[256] = {};
  LINA_RETURN_IF_ERROR(
      LINA_CU(cuDeviceGetName(name, static_cast<int>(sizeof(name)), handle)));
  device.name = name;

  struct {
    int *field;
    CUdevice_attribute attribute;
  } const attributes[] = {
      {&device.computeMajor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR},
      {&device.computeMinor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR},
      {&device.smCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT},
      {&device.warpSize, CU_DEVICE_ATTRIBUTE_WARP_SIZE},
      {&device.maxThreadsPerBlock, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK},
      {&device.maxThreadsPerSM,
       CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR},
      {&device.registersPerBlock, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK},
      {&device.registersPerSM,
       CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR},
      {&device.sharedMemoryPerBlock,
       CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK},
      {&device.sharedMemoryPerBlockOptin,
       CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN},
      {&device.sharedMemoryPerSM,
       CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR},
  };
  for (const auto &entry : attributes)
    LINA_RETURN_IF_ERROR(
        LINA_CU(cuDeviceGetAttribute(entry.field, entry.attribute, handle)));

  device.arch = "sm_" + std::to_string(device.computeMajor) +
                std::to_string(device.computeMinor);
  LINA_RETURN_IF_ERROR(LINA_CU(cuDriverGetVersion(&device.driverVersion)));
  return device;
}

Status makeCurrent(int ordinal) {
  // Retained once per device and never released: releasing the last
  // reference would destroy the context under modules and buffers that
  // still point into it.
  static std::mutex mutex;
  static std::map<int, CUcontext> retained;
  CUcontext context = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = retained.find(ordinal);
    if (it != retained.end()) {
      context = it->second;
    } else {
      CUdevice handle = 0;
      LINA_RETURN_IF_ERROR(LINA_CU(cuDeviceGet(&handle, ordinal)));
      LINA_RETURN_IF_ERROR(LINA_CU(cuDevicePrimaryCtxRetain(&context, handle)));
      retained.emplace(ordinal, context);
    }
  }
  return LINA_CU(cuCtxSetCurrent(context));
}

Status synchronizeDevice(int ordinal) {
  LINA_RETURN_IF_ERROR(makeCurrent(ordinal));
  return LINA_CU(cuCtxSynchronize());
}

Status synchronizeStream(CUstream stream) {
  return LINA_CU(cuStreamSynchronize(stream));
}

} // namespace lina::cuda
