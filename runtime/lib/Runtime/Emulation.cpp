//===- Emulation.cpp - Which device is emulated; the host compile ---------===//
//
// Part of lina. See Emulation.h.
//
//===----------------------------------------------------------------------===//
#include "lina/Runtime/Emulation.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace lina::cuda::emulation {

namespace {

const char *requestValue() {
  const char *v = std::getenv("LINA_EMULATE_GPU");
  return v && *v ? v : nullptr;
}

/// Removes a temporary directory and what lina wrote in it.
struct TemporaryDirectory {
  std::string path;
  ~TemporaryDirectory() {
    if (path.empty())
      return;
    for (const char *name : {"kernel.cpp", "kernel.so", "compiler.log"})
      std::remove((path + "/" + name).c_str());
    rmdir(path.c_str());
  }
};

std::string hostCompiler() {
  for (const char *variable : {"LINA_EMULATION_CXX", "CXX"})
    if (const char *v = std::getenv(variable); v && *v)
      return v;
  return "c++";
}

/// 'text' quoted for /bin/sh.
std::string shellQuoted(const std::string &text) {
  std::string out = "'";
  for (char c : text)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

} // namespace

bool enabled() { return requestValue() != nullptr; }

Expected<EmulatedGpu> requestedGpu() {
  const char *value = requestValue();
  std::string v = value ? value : "";
  EmulatedGpu gpu;
  if (v == "1" || v == "sm_90" || v == "h200") {
    gpu.name = "lina emulated GPU (NVIDIA H200, sm_90)";
    return gpu;
  }
  if (v == "sm_80" || v == "a100") {
    gpu.name = "lina emulated GPU (NVIDIA A100, sm_80)";
    gpu.computeMajor = 8;
    gpu.smCount = 108;
    gpu.sharedPerBlockOptin = 163 * 1024;
    gpu.sharedPerSM = 164 * 1024;
    return gpu;
  }
  return Status::error(StatusCode::InvalidArgument,
                       "LINA_EMULATE_GPU=" + v +
                           " names no device lina emulates: use sm_90 (an "
                           "H200) or sm_80 (an A100), or unset it to use the "
                           "GPU");
}

std::string compilerIdentity() {
  return "host compiler " + hostCompiler() + "\n" + deviceLibrarySource();
}

Expected<CompiledKernel> compile(const std::string &source,
                                 const CompileOptions &options) {
  TemporaryDirectory directory;
  const char *base = std::getenv("TMPDIR");
  std::string pattern =
      std::string(base && *base ? base : "/tmp") + "/lina-emulated-XXXXXX";
  if (!mkdtemp(pattern.data()))
    return Status::error(StatusCode::NoCompiler,
                         "cannot make a directory for the emulated device's "
                         "compile under " +
                             pattern + ": " + std::strerror(errno));
  directory.path = pattern;
  const std::string cpp = directory.path + "/kernel.cpp",
                    so = directory.path + "/kernel.so",
                    log = directory.path + "/compiler.log";
  {
    std::ofstream out(cpp, std::ios::binary);
    out << deviceLibrarySource() << source << "\n";
    if (!out)
      return Status::error(StatusCode::NoCompiler, "cannot write " + cpp);
  }
  // NVRTC's -D options carry over; the rest (arch, fast math, line info)
  // mean nothing to the host compiler.
  std::string command = shellQuoted(hostCompiler()) +
                        " -std=c++17 -O1 -fPIC -shared -w -fno-strict-aliasing";
  for (const std::string &flag : options.flags)
    if (flag.rfind("-D", 0) == 0)
      command += " " + shellQuoted(flag);
  // An arch-specific target (sm_90a) gets what NVRTC defines for it: the
  // Hopper scans' wgmma, TMA and mbarriers, which the device emulates.
  if (!options.arch.empty() && options.arch.back() == 'a')
    command += " -D__CUDA_ARCH_FEAT_SM90_ALL=1";
  command += " -o " + shellQuoted(so) + " " + shellQuoted(cpp) + " > " +
             shellQuoted(log) + " 2>&1";
  int status = std::system(command.c_str());
  if (status != 0) {
    std::string output = readFile(log);
    if (output.size() > 6000)
      output = output.substr(0, 6000) + "\n[...]";
    return Status::error(
        StatusCode::CompileError,
        "the host compiler (" + hostCompiler() +
            ") could not build the kernels for the emulated device (exit " +
            std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : status) +
            "):\n" + output);
  }
  std::string image = readFile(so);
  if (image.empty())
    return Status::error(StatusCode::NoCompiler,
                         "the host compiler left no " + so);
  CompiledKernel compiled;
  uint64_t size = image.size();
  compiled.cubin = std::string(kImageMagic, sizeof(kImageMagic)) +
                   std::string(reinterpret_cast<const char *>(&size), 8) +
                   image;
  compiled.arch = options.arch;
  return compiled;
}

} // namespace lina::cuda::emulation
