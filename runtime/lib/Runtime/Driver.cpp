//===- Driver.cpp - libcuda.so.1 loaded at run time -----------------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Runtime/Driver.h"
#include "lina/Runtime/Emulation.h"

#include "DynamicLibrary.h"

#include <mutex>

namespace lina::cuda {
namespace {

/// What every entry point returns before (or instead of) the real driver; the
/// value is never shown, check() reports the load failure instead.
template <typename... Args> CUresult missingDriver(Args...) {
  return CUDA_ERROR_NOT_INITIALIZED;
}

template <typename... Args> void setStub(CUresult (*&fn)(Args...)) {
  fn = &missingDriver<Args...>;
}

template <typename Fn>
bool resolve(const detail::DynamicLibrary &lib, Fn &fn, const char *name) {
  void *address = lib.symbol(name);
  if (!address)
    return false;
  fn = reinterpret_cast<Fn>(address);
  return true;
}

/// "cuMemAlloc_v2(&ptr, bytes)" -> "cuMemAlloc_v2".
std::string functionName(const char *callText) {
  std::string text = callText ? callText : "CUDA driver call";
  std::string::size_type paren = text.find('(');
  if (paren != std::string::npos)
    text.erase(paren);
  while (!text.empty() && text.back() == ' ')
    text.pop_back();
  return text;
}

} // namespace

// Every entry point, named as the member and as the exported symbol, except
// cuEventElapsedTime_v2, which falls back to an older name.
#define LINA_DRIVER_ENTRY_POINTS(X)                                            \
  X(cuInit)                                                                    \
  X(cuDriverGetVersion)                                                        \
  X(cuGetErrorString)                                                          \
  X(cuGetErrorName)                                                            \
  X(cuDeviceGetCount)                                                          \
  X(cuDeviceGet)                                                               \
  X(cuDeviceGetAttribute)                                                      \
  X(cuDeviceGetName)                                                           \
  X(cuDevicePrimaryCtxRetain)                                                  \
  X(cuCtxSetCurrent)                                                           \
  X(cuCtxSynchronize)                                                          \
  X(cuModuleLoadData)                                                          \
  X(cuModuleUnload)                                                            \
  X(cuModuleGetFunction)                                                       \
  X(cuFuncGetAttribute)                                                        \
  X(cuFuncSetAttribute)                                                        \
  X(cuLaunchKernel)                                                            \
  X(cuMemAlloc_v2)                                                             \
  X(cuMemFree_v2)                                                              \
  X(cuMemcpyHtoD_v2)                                                           \
  X(cuMemcpyDtoH_v2)                                                           \
  X(cuStreamSynchronize)                                                       \
  X(cuEventCreate)                                                             \
  X(cuEventRecord)                                                             \
  X(cuEventSynchronize)                                                        \
  X(cuEventDestroy_v2)                                                         \
  X(cuTensorMapEncodeTiled)

std::string noDriverMessage(const std::string &dlerror) {
  return "no CUDA driver found (libcuda.so.1 could not be loaded: " + dlerror +
         "); lina needs an NVIDIA GPU and driver to run kernels";
}

Driver::Driver() { installStubs(); }

void Driver::installStubs() {
#define LINA_SET_STUB(name) setStub(name);
  LINA_DRIVER_ENTRY_POINTS(LINA_SET_STUB)
#undef LINA_SET_STUB
  setStub(cuEventElapsedTime_v2);
}

const Driver &Driver::get() {
  static Driver driver;
  static std::once_flag loaded;
  std::call_once(loaded, [] { driver.load(); });
  return driver;
}

void Driver::load() {
  if (emulation::enabled()) {
    status_ = emulation::installDriver(*this);
    if (status_.ok())
      libraryName_ = "lina's emulated device (LINA_EMULATE_GPU)";
    return;
  }
  // Only the versioned soname: the unversioned libcuda.so is the toolkit's
  // link-time stub, which loads everywhere and fails every call.
  std::string error;
  detail::DynamicLibrary lib = detail::openFirst({"libcuda.so.1"}, error);
  if (!lib.handle) {
    status_ = Status::error(StatusCode::NoDriver, noDriverMessage(error));
    return;
  }
  std::string missing;
#define LINA_RESOLVE(name)                                                     \
  if (!resolve(lib, name, #name))                                              \
    missing += std::string(missing.empty() ? "" : ", ") + #name;
  LINA_DRIVER_ENTRY_POINTS(LINA_RESOLVE)
#undef LINA_RESOLVE
  // CUDA 13 headers map cuEventElapsedTime to _v2; drivers before 12.8 only
  // have the original, which behaves the same for lina's default-flag events.
  if (!resolve(lib, cuEventElapsedTime_v2, "cuEventElapsedTime_v2") &&
      !resolve(lib, cuEventElapsedTime_v2, "cuEventElapsedTime"))
    missing += std::string(missing.empty() ? "" : ", ") + "cuEventElapsedTime";

  if (!missing.empty()) {
    // A half-resolved table would crash on the first missing entry; go back
    // to the stubs so every call reports this instead.
    installStubs();
    status_ = Status::error(
        StatusCode::NoDriver,
        "the CUDA driver " + lib.name + " is too old: it lacks " + missing +
            "; lina needs a CUDA 12 or newer driver to run kernels");
    return;
  }

  libraryName_ = lib.name;
  Status init = check(cuInit(0), "cuInit");
  if (!init.ok())
    status_ = Status::error(StatusCode::NoDriver,
                            init.message() +
                                "; lina needs an NVIDIA GPU and driver to run "
                                "kernels",
                            init.apiResult());
}

Status Driver::check(CUresult result, const char *callText) const {
  if (result == CUDA_SUCCESS)
    return Status();
  if (!status_.ok())
    return status_;
  const char *name = nullptr;
  const char *description = nullptr;
  if (cuGetErrorName(result, &name) != CUDA_SUCCESS)
    name = nullptr;
  if (cuGetErrorString(result, &description) != CUDA_SUCCESS)
    description = nullptr;
  std::string message = functionName(callText) + " failed: ";
  message += name ? std::string(name) : "CUresult " + std::to_string(result);
  if (description)
    message += std::string(" (") + description + ")";
  return Status::error(StatusCode::DriverError, std::move(message), result);
}

} // namespace lina::cuda
