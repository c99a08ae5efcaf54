//===- Device.h - What the GPU at hand can do -------------------*- C++ -*-===//
//
// Part of lina. The facts about a GPU that decide what lina compiles for it
// (the exact arch for NVRTC) and which tuning candidates fit (shared memory,
// SM count). They are also part of the tuning cache key.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_RUNTIME_DEVICE_H
#define LINA_RUNTIME_DEVICE_H

#include "lina/Runtime/CudaApi.h"
#include "lina/Runtime/Status.h"

#include <string>

namespace lina::cuda {

/// One GPU as the driver describes it.
struct Device {
  int ordinal = 0;
  /// e.g. "NVIDIA H200".
  std::string name;
  int computeMajor = 0;
  int computeMinor = 0;
  /// The NVRTC arch for this device's own machine code, e.g. "sm_90".
  std::string arch;
  int smCount = 0;
  int warpSize = 32;
  int maxThreadsPerBlock = 0;
  int maxThreadsPerSM = 0;
  int registersPerBlock = 0;
  int registersPerSM = 0;
  /// Without opting in (cuFuncSetAttribute); 48 KiB on every current GPU.
  int sharedMemoryPerBlock = 0;
  /// The most a kernel can opt in to, e.g. 232448 on an H100/H200.
  int sharedMemoryPerBlockOptin = 0;
  int sharedMemoryPerSM = 0;
  /// As cuDriverGetVersion reports it: 13000 is CUDA 13.0.
  int driverVersion = 0;

  /// The arch that also enables this GPU's arch-specific instructions (wgmma,
  /// setmaxnreg on sm_90a), e.g. "sm_90a"; the plain arch before sm_90, where
  /// there are none. Code built for it runs on this exact arch only.
  std::string archSpecific() const;
};

/// How many GPUs the driver sees (an error without a driver).
Expected<int> deviceCount();

/// Describes GPU \p ordinal. Fails with the driver's message (StatusCode::
/// NoDriver on a machine without one), never aborts.
Expected<Device> queryDevice(int ordinal = 0);

/// Makes GPU \p ordinal's primary context current on the calling thread,
/// retaining it on first use. The primary context is the one the CUDA runtime
/// (and so PyTorch) uses, which lets lina launch on the caller's streams.
Status makeCurrent(int ordinal);

/// Waits until all work queued on GPU \p ordinal's primary context is done;
/// a fault in an earlier launch is reported here.
Status synchronizeDevice(int ordinal);

/// Waits until the work queued on \p stream is done.
Status synchronizeStream(CUstream stream);

} // namespace lina::cuda

#endif // LINA_RUNTIME_DEVICE_H
