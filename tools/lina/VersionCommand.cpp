//===- VersionCommand.cpp - `lina version` and `lina --version` --------===//
//
// Part of lina. The version comes from the cache keys' linaVersion(), the
// one place the CMake project version is compiled in, so the version a user
// reads is the one that keys their cached cubins and tuning results.
//
//===----------------------------------------------------------------------===//
#include "Commands.h"
#include "CommandLine.h"

#include "lina/Autotune/CacheKeys.h"
#include "lina/Runtime/Nvrtc.h"

#include "llvm/Config/llvm-config.h"

#include <cstdio>

namespace lina::cli {

int versionCommand(const std::vector<std::string> &args) {
  ArgParser p("version", "",
              "Print lina's version, the LLVM and MLIR it was built with and "
              "the NVRTC it loads (the one that compiles its kernels).");
  if (!p.parse(args))
    return 0;
  if (!p.positional().empty())
    throw UsageError("'lina version' takes no arguments, got '" +
                     p.positional().front() + "'");
  std::printf("lina %s\n", cache::linaVersion());
  // MLIR is built from the same LLVM tree and carries no version of its own.
  std::printf("llvm/mlir: %s\n", LLVM_VERSION_STRING);
  const cuda::Nvrtc &nvrtc = cuda::Nvrtc::get();
  Expected<cuda::NvrtcVersion> version = nvrtc.version();
  if (version.ok())
    std::printf("nvrtc: %s (%s)\n", version->str().c_str(),
                nvrtc.libraryName().c_str());
  else
    std::printf("nvrtc: not found\n");
  return 0;
}

} // namespace lina::cli
