//===- Nvrtc.cpp - CUDA C++ to cubin with NVRTC, loaded at run time -------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Runtime/Nvrtc.h"
#include "lina/Runtime/Emulation.h"

#include "CompileMemo.h"
#include "DynamicLibrary.h"

#include <cctype>
#include <cstdlib>
#include <mutex>
#include <type_traits>

namespace lina::cuda {
namespace {

// Declarations from CUDA 13.0's nvrtc.h (the API is the same in 12.x).
enum nvrtcResult : int { NVRTC_SUCCESS = 0 };
struct NvrtcProgramImpl;
using nvrtcProgram = NvrtcProgramImpl *;

/// Removes an NVRTC program however compile() returns.
class ProgramGuard {
public:
  ProgramGuard(nvrtcResult (*destroy)(nvrtcProgram *)) : destroy_(destroy) {}
  ~ProgramGuard() {
    if (program)
      (void)destroy_(&program);
  }
  nvrtcProgram program = nullptr;

private:
  nvrtcResult (*destroy_)(nvrtcProgram *);
};

std::string joinOptions(const std::vector<std::string> &options) {
  std::string joined;
  for (const std::string &option : options)
    joined += (joined.empty() ? "" : " ") + option;
  return joined;
}

bool setsArch(const std::string &flag) {
  for (const char *prefix : {"-arch", "--gpu-architecture", "--gpu-name"})
    if (flag.rfind(prefix, 0) == 0)
      return true;
  return false;
}

} // namespace

struct Nvrtc::EntryPoints {
  const char *(*nvrtcGetErrorString)(nvrtcResult result);
  nvrtcResult (*nvrtcVersion)(int *major, int *minor);
  nvrtcResult (*nvrtcGetNumSupportedArchs)(int *count);
  nvrtcResult (*nvrtcGetSupportedArchs)(int *archs);
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram *program, const char *source,
                                    const char *name, int numHeaders,
                                    const char *const *headers,
                                    const char *const *includeNames);
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram *program);
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram program, int numOptions,
                                     const char *const *options);
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram program, size_t *size);
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram program, char *log);
  nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram program, size_t *size);
  nvrtcResult (*nvrtcGetPTX)(nvrtcProgram program, char *ptx);
  nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram program, size_t *size);
  nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram program, char *cubin);

  /// "nvrtcCompileProgram failed: NVRTC_ERROR_INVALID_OPTION".
  Status check(nvrtcResult result, const char *call,
               StatusCode code = StatusCode::CompileError) const {
    if (result == NVRTC_SUCCESS)
      return Status();
    const char *name = nvrtcGetErrorString(result);
    return Status::error(
        code,
        std::string(call) + " failed: " +
            (name ? name : "nvrtcResult " + std::to_string(result)),
        result);
  }
};

std::string GpuArch::str() const {
  std::string text = (isVirtual ? "compute_" : "sm_") + std::to_string(number);
  if (suffix)
    text += suffix;
  return text;
}

Expected<GpuArch> parseGpuArch(const std::string &arch) {
  GpuArch parsed;
  std::string rest;
  if (arch.rfind("sm_", 0) == 0) {
    rest = arch.substr(3);
  } else if (arch.rfind("compute_", 0) == 0) {
    parsed.isVirtual = true;
    rest = arch.substr(8);
  }
  size_t digits = 0;
  while (digits < rest.size() &&
         std::isdigit(static_cast<unsigned char>(rest[digits])))
    ++digits;
  std::string suffix = rest.substr(digits);
  bool wellFormed = digits >= 2 && digits <= 3 && rest[0] != '0' &&
                    (suffix.empty() || suffix == "a" || suffix == "f");
  if (!wellFormed)
    return Status::error(
        StatusCode::InvalidArgument,
        "unknown GPU architecture '" + arch +
            "': expected sm_<NN> (a cubin) or compute_<NN> (PTX), optionally "
            "with an 'a' or 'f' suffix, e.g. sm_80, sm_90a, compute_90");
  parsed.number = std::stoi(rest.substr(0, digits));
  parsed.suffix = suffix.empty() ? 0 : suffix[0];
  return parsed;
}

std::string NvrtcVersion::str() const {
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string numberSourceLines(const std::string &source) {
  std::vector<std::string> lines;
  std::string::size_type start = 0;
  while (true) {
    std::string::size_type end = source.find('\n', start);
    lines.push_back(source.substr(start, end - start));
    if (end == std::string::npos)
      break;
    start = end + 1;
  }
  // A trailing newline ends the last line rather than starting an empty one.
  if (lines.size() > 1 && lines.back().empty())
    lines.pop_back();
  size_t width = std::to_string(lines.size()).size();
  std::string numbered;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string number = std::to_string(i + 1);
    std::string line = lines[i];
    while (!line.empty() &&
           std::isspace(static_cast<unsigned char>(line.back())))
      line.pop_back();
    numbered +=
        std::string(width - number.size(), '0') + number + " " + line + "\n";
  }
  return numbered;
}

Nvrtc::Nvrtc() = default;
Nvrtc::~Nvrtc() = default;

const Nvrtc &Nvrtc::get() {
  static Nvrtc nvrtc;
  static std::once_flag loaded;
  std::call_once(loaded, [] { nvrtc.load(); });
  return nvrtc;
}

void Nvrtc::load() {
  // The emulated device compiles with the host's compiler (Emulation.h):
  // NVRTC is not needed, and its version (a cache key) stays 0.0.
  if (emulation::enabled()) {
    libraryName_ = "the host C++ compiler (LINA_EMULATE_GPU)";
    return;
  }
  // The plain name first, so LD_LIBRARY_PATH and the loader's cache decide,
  // then the toolkit's usual places for processes started without them.
  std::vector<std::string> names = {"libnvrtc.so", "libnvrtc.so.13",
                                    "libnvrtc.so.12"};
  std::vector<std::string> candidates = names;
  std::vector<std::string> directories;
  if (const char *cudaHome = std::getenv("CUDA_HOME"))
    if (*cudaHome)
      directories.push_back(std::string(cudaHome) + "/lib64/");
  directories.push_back("/usr/local/cuda/lib64/");
  for (const std::string &directory : directories)
    for (const std::string &name : names)
      candidates.push_back(directory + name);

  std::string error;
  detail::DynamicLibrary lib = detail::openFirst(candidates, error);
  if (!lib.handle) {
    status_ = Status::error(
        StatusCode::NoCompiler,
        "NVRTC not found, so lina cannot compile kernels; install the CUDA "
        "toolkit's NVRTC (libnvrtc.so) or set CUDA_HOME to the toolkit. "
        "dlopen said:\n" +
            error);
    return;
  }

  auto api = std::make_unique<EntryPoints>();
  std::string missing;
  auto resolve = [&](auto &fn, const char *name) {
    void *address = lib.symbol(name);
    if (!address)
      missing += std::string(missing.empty() ? "" : ", ") + name;
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(address);
  };
#define LINA_RESOLVE(name) resolve(api->name, #name)
  LINA_RESOLVE(nvrtcGetErrorString);
  LINA_RESOLVE(nvrtcVersion);
  LINA_RESOLVE(nvrtcGetNumSupportedArchs);
  LINA_RESOLVE(nvrtcGetSupportedArchs);
  LINA_RESOLVE(nvrtcCreateProgram);
  LINA_RESOLVE(nvrtcDestroyProgram);
  LINA_RESOLVE(nvrtcCompileProgram);
  LINA_RESOLVE(nvrtcGetProgramLogSize);
  LINA_RESOLVE(nvrtcGetProgramLog);
  LINA_RESOLVE(nvrtcGetPTXSize);
  LINA_RESOLVE(nvrtcGetPTX);
  LINA_RESOLVE(nvrtcGetCUBINSize);
  LINA_RESOLVE(nvrtcGetCUBIN);
#undef LINA_RESOLVE
  if (!missing.empty()) {
    status_ = Status::error(StatusCode::NoCompiler,
                            lib.name + " is too old for lina: it lacks " +
                                missing + " (lina needs NVRTC 11.2 or newer)");
    return;
  }

  Status versioned =
      api->check(api->nvrtcVersion(&version_.major, &version_.minor),
                 "nvrtcVersion", StatusCode::NoCompiler);
  int count = 0;
  if (versioned.ok())
    versioned = api->check(api->nvrtcGetNumSupportedArchs(&count),
                           "nvrtcGetNumSupportedArchs", StatusCode::NoCompiler);
  if (versioned.ok()) {
    supportedArchs_.resize(count > 0 ? count : 0);
    versioned = api->check(api->nvrtcGetSupportedArchs(supportedArchs_.data()),
                           "nvrtcGetSupportedArchs", StatusCode::NoCompiler);
  }
  if (!versioned.ok()) {
    status_ = Status::error(StatusCode::NoCompiler,
                            lib.name + " is not usable: " + versioned.message(),
                            versioned.apiResult());
    return;
  }
  libraryName_ = lib.name;
  api_ = std::move(api);
}

Expected<NvrtcVersion> Nvrtc::version() const {
  LINA_RETURN_IF_ERROR(status_);
  return version_;
}

Expected<std::vector<int>> Nvrtc::supportedArchs() const {
  LINA_RETURN_IF_ERROR(status_);
  return supportedArchs_;
}

Expected<CompiledKernel> Nvrtc::compile(const std::string &source,
                                        const CompileOptions &options) const {
  if (emulation::enabled()) {
    CompileMemo memo(emulation::compilerIdentity(), source, options);
    if (std::optional<CompiledKernel> remembered = memo.lookup())
      return *remembered;
    Expected<CompiledKernel> compiled = emulation::compile(source, options);
    if (compiled.ok())
      memo.store(*compiled);
    return compiled;
  }
  LINA_RETURN_IF_ERROR(status_);
  Expected<GpuArch> arch = parseGpuArch(options.arch);
  if (!arch.ok())
    return arch.status();
  bool supported = false;
  std::string supportedList;
  for (int number : supportedArchs_) {
    supported |= number == arch->number;
    supportedList +=
        (supportedList.empty() ? "sm_" : ", sm_") + std::to_string(number);
  }
  if (!supported)
    return Status::error(StatusCode::InvalidArgument,
                         "NVRTC " + version_.str() + " cannot compile for " +
                             options.arch + ": it supports " + supportedList +
                             " (a newer GPU needs a newer NVRTC)");
  // NVRTC's own message for these is "invalid or no value specified with
  // --nv_arch flag", which does not say what is wrong.
  if ((arch->suffix == 'a' && arch->number < 90) ||
      (arch->suffix == 'f' && arch->number < 100))
    return Status::error(StatusCode::InvalidArgument,
                         options.arch + " does not exist: the '" +
                             std::string(1, arch->suffix) +
                             "' suffix starts at " +
                             (arch->suffix == 'a' ? "sm_90a" : "sm_100f"));
  for (const std::string &flag : options.flags)
    if (setsArch(flag))
      return Status::error(StatusCode::InvalidArgument,
                           "compile flag '" + flag +
                               "' sets the arch; set CompileOptions::arch "
                               "instead");

  CompileMemo memo("NVRTC " + version_.str() + " " + libraryName_, source,
                   options);
  if (std::optional<CompiledKernel> remembered = memo.lookup())
    return *remembered;
  Expected<CompiledKernel> compiled = compileProgram(source, options, *arch);
  if (compiled.ok())
    memo.store(*compiled);
  return compiled;
}

Expected<CompiledKernel> Nvrtc::compileProgram(const std::string &source,
                                               const CompileOptions &options,
                                               const GpuArch &arch) const {
  std::vector<std::string> args = {"--gpu-architecture=" + options.arch};
  args.insert(args.end(), options.flags.begin(), options.flags.end());
  std::vector<const char *> argv;
  for (const std::string &arg : args)
    argv.push_back(arg.c_str());

  ProgramGuard guard(api_->nvrtcDestroyProgram);
  // No headers and no include names: see the file comment in Nvrtc.h.
  LINA_RETURN_IF_ERROR(
      api_->check(api_->nvrtcCreateProgram(&guard.program, source.c_str(),
                                           options.programName.c_str(), 0,
                                           nullptr, nullptr),
                  "nvrtcCreateProgram"));
  nvrtcResult compiled = api_->nvrtcCompileProgram(
      guard.program, static_cast<int>(argv.size()), argv.data());

  CompiledKernel result;
  result.arch = options.arch;
  size_t logSize = 0;
  if (api_->nvrtcGetProgramLogSize(guard.program, &logSize) == NVRTC_SUCCESS &&
      logSize > 1) {
    result.log.resize(logSize);
    if (api_->nvrtcGetProgramLog(guard.program, result.log.data()) !=
        NVRTC_SUCCESS)
      result.log.clear();
    // The size counts the terminating NUL.
    while (!result.log.empty() &&
           (result.log.back() == '\0' || result.log.back() == '\n'))
      result.log.pop_back();
  }

  if (compiled != NVRTC_SUCCESS) {
    const char *name = api_->nvrtcGetErrorString(compiled);
    std::string message = "NVRTC " + version_.str() + " could not compile " +
                          options.programName + " for " + options.arch + " (" +
                          (name ? name : "error") + "):\n";
    message += result.log.empty() ? "(NVRTC wrote no log)" : result.log;
    message += "\n-----\nName: " + options.programName +
               "\nOptions: " + joinOptions(args) + "\nCUDA source:\n" +
               numberSourceLines(source) + "-----";
    return Status::error(StatusCode::CompileError, std::move(message),
                         compiled);
  }

  size_t size = 0;
  if (arch.isVirtual) {
    LINA_RETURN_IF_ERROR(api_->check(
        api_->nvrtcGetPTXSize(guard.program, &size), "nvrtcGetPTXSize"));
    result.cubin.resize(size);
    LINA_RETURN_IF_ERROR(api_->check(
        api_->nvrtcGetPTX(guard.program, result.cubin.data()), "nvrtcGetPTX"));
    // PTX comes NUL-terminated; std::string keeps its own NUL for the driver.
    while (!result.cubin.empty() && result.cubin.back() == '\0')
      result.cubin.pop_back();
  } else {
    LINA_RETURN_IF_ERROR(api_->check(
        api_->nvrtcGetCUBINSize(guard.program, &size), "nvrtcGetCUBINSize"));
    result.cubin.resize(size);
    LINA_RETURN_IF_ERROR(
        api_->check(api_->nvrtcGetCUBIN(guard.program, result.cubin.data()),
                    "nvrtcGetCUBIN"));
  }
  return result;
}

Expected<CompiledKernel> compileCuda(const std::string &source,
                                     const CompileOptions &options) {
  return Nvrtc::get().compile(source, options);
}

} // namespace lina::cuda
