//===- EmulatedDriver.cpp - The driver's entry points on the host ---------===//
//
// Part of lina. The CUDA driver table (Driver.h) as the emulated device
// (Emulation.h) answers it: one device with the attributes of the GPU it
// stands for, host memory for device memory, a module is an emulated image
// (a host shared object, Emulation.cpp) loaded with dlopen, and a launch
// runs the grid before it returns (EmulatedDevice.cuh's
// lina_emulation_launch), so streams, events and synchronisation have
// nothing to wait for.
//
//===----------------------------------------------------------------------===//
#include "EmulatedTensorMap.h"
#include "lina/Runtime/Driver.h"
#include "lina/Runtime/Emulation.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unistd.h>

namespace lina::cuda::emulation {

namespace {

using LaunchFn = int (*)(void (*)(void **), void **, unsigned, unsigned,
                         unsigned, unsigned, unsigned, unsigned, unsigned,
                         char *, size_t);

struct EmulatedModule;

struct EmulatedFunction {
  EmulatedModule *module = nullptr;
  void (*entry)(void **) = nullptr;
  int maxDynamicShared = 48 * 1024;
};

/// A loaded image and the kernels looked up in it (freed with it, as a
/// CUfunction dies with its CUmodule).
struct EmulatedModule {
  void *handle = nullptr;
  LaunchFn launch = nullptr;
  std::mutex mutex; // guards functions: lookups may come from any thread
  std::map<std::string, std::unique_ptr<EmulatedFunction>> functions;
};

struct EmulatedEvent {
  std::chrono::steady_clock::time_point at;
};

/// The GPU this process emulates (LINA_EMULATE_GPU was checked before the
/// table was installed).
const EmulatedGpu &gpu() {
  static const EmulatedGpu g = [] {
    Expected<EmulatedGpu> requested = requestedGpu();
    return requested.ok() ? *requested : EmulatedGpu();
  }();
  return g;
}

/// What the last failed launch on this thread said (cuGetErrorString
/// gives it for CUDA_ERROR_LAUNCH_FAILED).
thread_local std::string lastLaunchMessage;

CUresult init(unsigned) { return CUDA_SUCCESS; }
CUresult driverVersion(int *version) {
  *version = 13000;
  return CUDA_SUCCESS;
}
/// The results the emulated entry points give, by name and meaning.
struct ErrorText {
  CUresult code;
  const char *name, *text;
};
constexpr ErrorText kErrors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE",
     "an argument the emulated device cannot take"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY",
     "out of host memory for the emulated device"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE",
     "the emulated device is GPU 0 alone"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE",
     "not an image for the emulated device (compiled by NVRTC, or by "
     "another lina?)"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE",
     "no such emulated module"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND",
     "no such kernel in the emulated module"},
    {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
     "more threads or shared memory than the emulated GPU has"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED",
     "the emulated kernel failed"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED",
     "not supported by the emulated device"},
};

const ErrorText &errorText(CUresult error) {
  static const ErrorText unknown{CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN",
                                 "emulated device error"};
  for (const ErrorText &e : kErrors)
    if (e.code == error)
      return e;
  return unknown;
}
CUresult errorString(CUresult error, const char **text) {
  *text = error == CUDA_ERROR_LAUNCH_FAILED && !lastLaunchMessage.empty()
              ? lastLaunchMessage.c_str()
              : errorText(error).text;
  return CUDA_SUCCESS;
}
CUresult errorName(CUresult error, const char **text) {
  *text = errorText(error).name;
  return CUDA_SUCCESS;
}
CUresult deviceCount(int *count) {
  *count = 1;
  return CUDA_SUCCESS;
}
CUresult deviceGet(CUdevice *device, int ordinal) {
  if (ordinal != 0)
    return CUDA_ERROR_INVALID_DEVICE;
  *device = 0;
  return CUDA_SUCCESS;
}
CUresult deviceAttribute(int *value, CUdevice_attribute attribute, CUdevice) {
  const EmulatedGpu &g = gpu();
  switch (attribute) {
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
    *value = 1024;
    break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
    *value = g.sharedPerBlock;
    break;
  case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
    *value = 32;
    break;
  case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
  case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR:
    *value = g.registersPerSM;
    break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
    *value = g.smCount;
    break;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
    *value = g.maxThreadsPerSM;
    break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
    *value = g.computeMajor;
    break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
    *value = g.computeMinor;
    break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
    *value = g.sharedPerSM;
    break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
    *value = g.sharedPerBlockOptin;
    break;
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}
CUresult deviceName(char *name, int length, CUdevice) {
  std::snprintf(name, static_cast<size_t>(length), "%s", gpu().name.c_str());
  return CUDA_SUCCESS;
}
CUresult primaryContext(CUcontext *context, CUdevice) {
  static int token;
  *context = reinterpret_cast<CUcontext>(&token);
  return CUDA_SUCCESS;
}
CUresult setContext(CUcontext) { return CUDA_SUCCESS; }
// Launches finish before they return.
CUresult synchronize() { return CUDA_SUCCESS; }
CUresult streamSynchronize(CUstream) { return CUDA_SUCCESS; }

CUresult moduleLoad(CUmodule *module, const void *image) {
  const char *bytes = static_cast<const char *>(image);
  if (!bytes || std::memcmp(bytes, kImageMagic, sizeof(kImageMagic)) != 0)
    return CUDA_ERROR_INVALID_IMAGE;
  uint64_t size = 0;
  std::memcpy(&size, bytes + sizeof(kImageMagic), 8);
  const char *object = bytes + sizeof(kImageMagic) + 8;
  // dlopen wants a file: written, opened, removed.
  const char *base = std::getenv("TMPDIR");
  std::string path =
      std::string(base && *base ? base : "/tmp") + "/lina-emulated-XXXXXX.so";
  int fd = mkstemps(path.data(), 3);
  if (fd < 0)
    return CUDA_ERROR_OUT_OF_MEMORY;
  size_t written = 0;
  while (written < size) {
    ssize_t n = write(fd, object + written, size - written);
    if (n <= 0)
      break;
    written += static_cast<size_t>(n);
  }
  close(fd);
  void *handle =
      written == size ? dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) : nullptr;
  unlink(path.c_str());
  if (!handle)
    return CUDA_ERROR_INVALID_IMAGE;
  auto launch =
      reinterpret_cast<LaunchFn>(dlsym(handle, "lina_emulation_launch"));
  if (!launch) {
    dlclose(handle);
    return CUDA_ERROR_INVALID_IMAGE;
  }
  *module = reinterpret_cast<CUmodule>(new EmulatedModule{handle, launch});
  return CUDA_SUCCESS;
}
CUresult moduleUnload(CUmodule module) {
  auto *m = reinterpret_cast<EmulatedModule *>(module);
  if (!m)
    return CUDA_ERROR_INVALID_HANDLE;
  dlclose(m->handle);
  delete m;
  return CUDA_SUCCESS;
}
CUresult moduleFunction(CUfunction *function, CUmodule module,
                        const char *name) {
  auto *m = reinterpret_cast<EmulatedModule *>(module);
  if (!m)
    return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard<std::mutex> lock(m->mutex);
  std::unique_ptr<EmulatedFunction> &f = m->functions[name];
  if (!f) {
    auto entry = reinterpret_cast<void (*)(void **)>(
        dlsym(m->handle, (std::string(name) + "__emulated").c_str()));
    if (!entry) {
      m->functions.erase(name);
      return CUDA_ERROR_NOT_FOUND;
    }
    f = std::make_unique<EmulatedFunction>(EmulatedFunction{m, entry});
  }
  *function = reinterpret_cast<CUfunction>(f.get());
  return CUDA_SUCCESS;
}
CUresult functionAttribute(int *value, CUfunction_attribute attribute,
                           CUfunction function) {
  auto *f = reinterpret_cast<EmulatedFunction *>(function);
  switch (attribute) {
  case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
    *value = 1024;
    break;
  case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
    *value = f->maxDynamicShared;
    break;
  case CU_FUNC_ATTRIBUTE_NUM_REGS:
  case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES:
  case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
  case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES:
    // No registers, spills or static shared memory to report on the host.
    *value = 0;
    break;
  default:
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  return CUDA_SUCCESS;
}
CUresult setFunctionAttribute(CUfunction function,
                              CUfunction_attribute attribute, int value) {
  auto *f = reinterpret_cast<EmulatedFunction *>(function);
  if (attribute == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
    if (value < 0 || value > gpu().sharedPerBlockOptin)
      return CUDA_ERROR_INVALID_VALUE;
    f->maxDynamicShared = value;
  }
  return CUDA_SUCCESS;
}
CUresult launch(CUfunction function, unsigned gx, unsigned gy, unsigned gz,
                unsigned bx, unsigned by, unsigned bz, unsigned shared,
                CUstream, void **params, void **extra) {
  auto *f = reinterpret_cast<EmulatedFunction *>(function);
  if (!f || extra)
    return CUDA_ERROR_INVALID_VALUE;
  if (bx * by * bz > 1024 || bx * by * bz == 0 || gx * gy * gz == 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (shared > static_cast<unsigned>(f->maxDynamicShared))
    return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  char message[256] = {};
  int result = f->module->launch(f->entry, params, gx, gy, gz, bx, by, bz,
                                 shared, message, sizeof(message));
  if (result == 0)
    return CUDA_SUCCESS;
  lastLaunchMessage = std::string("the emulated kernel failed: ") + message;
  return result == 3 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_LAUNCH_FAILED;
}
CUresult allocate(CUdeviceptr *pointer, size_t bytes) {
  void *p = nullptr;
  // 256-byte aligned as cuMemAlloc's are; never size zero.
  if (posix_memalign(&p, 256, bytes ? bytes : 1) != 0)
    return CUDA_ERROR_OUT_OF_MEMORY;
  // Fresh device memory holds whatever it held: NaN bytes here, so a
  // kernel that reads before it writes shows it.
  std::memset(p, 0xff, bytes);
  *pointer = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}
CUresult release(CUdeviceptr pointer) {
  std::free(reinterpret_cast<void *>(pointer));
  return CUDA_SUCCESS;
}
CUresult copyToDevice(CUdeviceptr to, const void *from, size_t bytes) {
  std::memcpy(reinterpret_cast<void *>(to), from, bytes);
  return CUDA_SUCCESS;
}
CUresult copyToHost(void *to, CUdeviceptr from, size_t bytes) {
  std::memcpy(to, reinterpret_cast<const void *>(from), bytes);
  return CUDA_SUCCESS;
}
CUresult eventCreate(CUevent *event, unsigned) {
  *event = reinterpret_cast<CUevent>(new EmulatedEvent);
  return CUDA_SUCCESS;
}
CUresult eventRecord(CUevent event, CUstream) {
  reinterpret_cast<EmulatedEvent *>(event)->at =
      std::chrono::steady_clock::now();
  return CUDA_SUCCESS;
}
CUresult eventSynchronize(CUevent) { return CUDA_SUCCESS; }
CUresult eventElapsed(float *ms, CUevent start, CUevent end) {
  *ms = std::chrono::duration<float, std::milli>(
            reinterpret_cast<EmulatedEvent *>(end)->at -
            reinterpret_cast<EmulatedEvent *>(start)->at)
            .count();
  return CUDA_SUCCESS;
}
CUresult eventDestroy(CUevent event) {
  delete reinterpret_cast<EmulatedEvent *>(event);
  return CUDA_SUCCESS;
}
/// cuTensorMapEncodeTiled with the driver's checks (rank, alignment of the
/// address and strides, box extents, the swizzle's span): element strides
/// other than 1 and interleaved layouts, which lina never asks for, are
/// refused as not supported.
CUresult tensorMap(CUtensorMap *map, CUtensorMapDataType type, unsigned rank,
                   void *address, const unsigned long long *dims,
                   const unsigned long long *strides, const unsigned *box,
                   const unsigned *elementStrides,
                   CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                   CUtensorMapL2promotion, CUtensorMapFloatOOBfill) {
  static const unsigned kElementBytes[] = {1, 2, 4, 4, 8, 8, 2,
                                           4, 8, 2, 4, 4, 4};
  const int t = static_cast<int>(type), sw = static_cast<int>(swizzle);
  if (!map || !address || rank < 1 || rank > 5 || t < 0 || t > 12 || sw < 0 ||
      sw > 3 || reinterpret_cast<uintptr_t>(address) % 16 != 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (static_cast<int>(interleave) != 0)
    return CUDA_ERROR_NOT_SUPPORTED;
  lina_emu::TensorMap m{};
  m.tag = lina_emu::kTensorMapTag;
  m.address = reinterpret_cast<uintptr_t>(address);
  m.rank = rank;
  m.elementBytes = kElementBytes[t];
  m.swizzleBytes = sw == 0 ? 0 : 16u << sw;
  for (unsigned d = 0; d < rank; ++d) {
    if (dims[d] == 0 || dims[d] > (1ull << 32) || box[d] == 0 || box[d] > 256)
      return CUDA_ERROR_INVALID_VALUE;
    if (elementStrides[d] != 1)
      return CUDA_ERROR_NOT_SUPPORTED;
    m.dims[d] = dims[d];
    m.box[d] = box[d];
    // Dimension 0's elements are adjacent; the others' strides are given.
    m.strides[d] = d == 0 ? m.elementBytes : strides[d - 1];
    if (d > 0 && (m.strides[d] % 16 != 0 || m.strides[d] >= (1ull << 40)))
      return CUDA_ERROR_INVALID_VALUE;
  }
  const unsigned rowBytes = box[0] * m.elementBytes;
  if (rowBytes % 16 != 0 || (m.swizzleBytes && rowBytes > m.swizzleBytes))
    return CUDA_ERROR_INVALID_VALUE;
  std::memset(map, 0, sizeof *map);
  std::memcpy(map, &m, sizeof m);
  return CUDA_SUCCESS;
}

} // namespace

Status installDriver(Driver &d) {
  Expected<EmulatedGpu> requested = requestedGpu();
  if (!requested.ok())
    return requested.status();
  d.cuInit = init;
  d.cuDriverGetVersion = driverVersion;
  d.cuGetErrorString = errorString;
  d.cuGetErrorName = errorName;
  d.cuDeviceGetCount = deviceCount;
  d.cuDeviceGet = deviceGet;
  d.cuDeviceGetAttribute = deviceAttribute;
  d.cuDeviceGetName = deviceName;
  d.cuDevicePrimaryCtxRetain = primaryContext;
  d.cuCtxSetCurrent = setContext;
  d.cuCtxSynchronize = synchronize;
  d.cuModuleLoadData = moduleLoad;
  d.cuModuleUnload = moduleUnload;
  d.cuModuleGetFunction = moduleFunction;
  d.cuFuncGetAttribute = functionAttribute;
  d.cuFuncSetAttribute = setFunctionAttribute;
  d.cuLaunchKernel = launch;
  d.cuMemAlloc_v2 = allocate;
  d.cuMemFree_v2 = release;
  d.cuMemcpyHtoD_v2 = copyToDevice;
  d.cuMemcpyDtoH_v2 = copyToHost;
  d.cuStreamSynchronize = streamSynchronize;
  d.cuEventCreate = eventCreate;
  d.cuEventRecord = eventRecord;
  d.cuEventSynchronize = eventSynchronize;
  d.cuEventElapsedTime_v2 = eventElapsed;
  d.cuEventDestroy_v2 = eventDestroy;
  d.cuTensorMapEncodeTiled = tensorMap;
  return Status();
}

} // namespace lina::cuda::emulation
