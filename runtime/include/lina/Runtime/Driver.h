//===- Driver.h - libcuda.so.1 loaded at run time ---------------*- C++ -*-===//
//
// Part of lina. The CUDA driver API as a table of function pointers filled by
// dlopen/dlsym on first use (jitify2's LibCuda). lina never links libcuda: a
// binary built here runs on a machine without a GPU and says so in a message
// instead of failing to start.
//
// Call the driver through LINA_CU, which turns the CUresult into a Status:
//
//   CUmodule mod;
//   LINA_RETURN_IF_ERROR(LINA_CU(cuModuleLoadData(&mod, image)));
//
//===----------------------------------------------------------------------===//
#ifndef LINA_RUNTIME_DRIVER_H
#define LINA_RUNTIME_DRIVER_H

#include "lina/Runtime/CudaApi.h"
#include "lina/Runtime/Status.h"

#include <string>

namespace lina::cuda {

/// The process-wide CUDA driver. Loading happens once, on the first get(),
/// from any thread (std::call_once); the library is never unloaded, since
/// modules and contexts may outlive any owner we could give it.
///
/// Without a driver every function pointer is a stub returning an error, and
/// check() turns that into the "no CUDA driver found" message, so code written
/// against the driver needs no separate "is there a GPU" branch.
class Driver {
public:
  /// The loaded driver (or the stubs, when loading failed).
  static const Driver &get();

  /// Success when libcuda.so.1 loaded, every symbol resolved and cuInit
  /// succeeded; otherwise the reason (StatusCode::NoDriver).
  const Status &status() const { return status_; }
  bool available() const { return status_.ok(); }

  /// The path or name dlopen accepted, empty when none did.
  const std::string &libraryName() const { return libraryName_; }

  /// Turns \p result of the driver call \p callText (the text of the call, or
  /// just the function's name; anything from the first '(' on is dropped) into
  /// a Status: "cuModuleLoadData failed: CUDA_ERROR_INVALID_IMAGE (device
  /// kernel image is invalid)". When the driver is unavailable the error is
  /// status(), whatever \p result says, because that is the real cause.
  Status check(CUresult result, const char *callText) const;

  // Signatures and versioned names as in CUDA 13.0's cuda.h. Members use the
  // names the macros in cuda.h expand to (cuMemAlloc -> cuMemAlloc_v2), so a
  // file that also includes cuda.h sees the same member names.
  CUresult (*cuInit)(unsigned int flags);
  CUresult (*cuDriverGetVersion)(int *driverVersion);
  CUresult (*cuGetErrorString)(CUresult error, const char **str);
  CUresult (*cuGetErrorName)(CUresult error, const char **str);
  CUresult (*cuDeviceGetCount)(int *count);
  CUresult (*cuDeviceGet)(CUdevice *device, int ordinal);
  CUresult (*cuDeviceGetAttribute)(int *value, CUdevice_attribute attrib,
                                   CUdevice dev);
  CUresult (*cuDeviceGetName)(char *name, int len, CUdevice dev);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
  CUresult (*cuCtxSetCurrent)(CUcontext ctx);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuModuleLoadData)(CUmodule *module, const void *image);
  CUresult (*cuModuleUnload)(CUmodule module);
  CUresult (*cuModuleGetFunction)(CUfunction *fn, CUmodule module,
                                  const char *name);
  CUresult (*cuFuncGetAttribute)(int *value, CUfunction_attribute attrib,
                                 CUfunction fn);
  CUresult (*cuFuncSetAttribute)(CUfunction fn, CUfunction_attribute attrib,
                                 int value);
  CUresult (*cuLaunchKernel)(CUfunction fn, unsigned gridX, unsigned gridY,
                             unsigned gridZ, unsigned blockX, unsigned blockY,
                             unsigned blockZ, unsigned sharedMemBytes,
                             CUstream stream, void **params, void **extra);
  CUresult (*cuMemAlloc_v2)(CUdeviceptr *ptr, size_t bytes);
  CUresult (*cuMemFree_v2)(CUdeviceptr ptr);
  CUresult (*cuMemcpyHtoD_v2)(CUdeviceptr dst, const void *src, size_t bytes);
  CUresult (*cuMemcpyDtoH_v2)(void *dst, CUdeviceptr src, size_t bytes);
  CUresult (*cuStreamSynchronize)(CUstream stream);
  CUresult (*cuEventCreate)(CUevent *event, unsigned int flags);
  CUresult (*cuEventRecord)(CUevent event, CUstream stream);
  CUresult (*cuEventSynchronize)(CUevent event);
  /// cuEventElapsedTime_v2 (driver 12.8+), else the original entry point.
  CUresult (*cuEventElapsedTime_v2)(float *ms, CUevent start, CUevent end);
  CUresult (*cuEventDestroy_v2)(CUevent event);
  CUresult (*cuTensorMapEncodeTiled)(
      CUtensorMap *map, CUtensorMapDataType type, unsigned rank, void *address,
      const unsigned long long *dims, const unsigned long long *strides,
      const unsigned *box, const unsigned *elementStrides,
      CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
      CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oobFill);

  Driver(const Driver &) = delete;
  Driver &operator=(const Driver &) = delete;

private:
  Driver();
  void installStubs();
  void load();

  Status status_;
  std::string libraryName_;
};

/// The message every call gives on a machine without libcuda.so.1;
/// \p dlerror is what dlopen reported.
std::string noDriverMessage(const std::string &dlerror);

} // namespace lina::cuda

/// Calls the driver function named at the start of \p call through the loaded
/// table and returns a Status naming it. \p call is written as for the C API:
/// LINA_CU(cuMemAlloc_v2(&ptr, bytes)).
#define LINA_CU(call)                                                          \
  (::lina::cuda::Driver::get().check(::lina::cuda::Driver::get().call, #call))

#endif // LINA_RUNTIME_DRIVER_H
