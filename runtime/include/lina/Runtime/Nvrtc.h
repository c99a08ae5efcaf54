//===- Nvrtc.h - CUDA C++ to cubin with NVRTC at run time -------*- C++ -*-===//
//
// Part of lina. The program -> compiled stage: NVRTC turns the CUDA C++ that
// codegen prints into a cubin for the GPU's exact arch (or PTX for a compute_*
// arch). libnvrtc is found with dlopen on first use, so lina builds without
// the CUDA toolkit and reports a missing NVRTC as an error value.
//
// No include path is ever passed: lina's kernels ship their own prelude, and
// a user's machine cannot be counted on to have the CUDA headers.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_RUNTIME_NVRTC_H
#define LINA_RUNTIME_NVRTC_H

#include "lina/Runtime/Status.h"

#include <memory>
#include <string>
#include <vector>

namespace lina::cuda {

/// A target as NVRTC's --gpu-architecture spells it: sm_<N> (machine code,
/// a cubin) or compute_<N> (PTX), optionally with the arch-specific 'a' or
/// family 'f' suffix, e.g. sm_80, sm_90a, compute_90.
struct GpuArch {
  /// compute_<N>: PTX for the driver to JIT, not a cubin.
  bool isVirtual = false;
  /// 10 * major + minor, e.g. 90.
  int number = 0;
  /// 0, 'a' or 'f'.
  char suffix = 0;

  /// Back to NVRTC's spelling.
  std::string str() const;
};

/// Parses \p arch, or explains the expected spelling.
Expected<GpuArch> parseGpuArch(const std::string &arch);

/// How to compile one program.
struct CompileOptions {
  /// Where it will run, e.g. Device::arch or Device::archSpecific().
  std::string arch = "sm_80";
  /// Further NVRTC options, e.g. "-DCHUNK=64", "--use_fast_math", "-lineinfo".
  /// The arch is set by \ref arch only.
  std::vector<std::string> flags;
  /// The file name NVRTC puts in its messages.
  std::string programName = "lina_kernel.cu";
};

/// The output of a successful compile.
struct CompiledKernel {
  /// The cubin (an ELF image) for an sm_* arch; PTX text for a compute_* one.
  std::string cubin;
  /// NVRTC's log, e.g. warnings; often empty.
  std::string log;
  /// The arch it was compiled for, as given.
  std::string arch;

  bool isPtx() const { return arch.rfind("compute_", 0) == 0; }
};

struct NvrtcVersion {
  int major = 0;
  int minor = 0;
  /// "13.0".
  std::string str() const;
};

/// The process-wide NVRTC, loaded once on the first get() from any thread.
/// Tries libnvrtc.so, libnvrtc.so.13, libnvrtc.so.12 on the loader's path,
/// then in $CUDA_HOME/lib64 and /usr/local/cuda/lib64.
class Nvrtc {
public:
  static const Nvrtc &get();

  /// Success when NVRTC loaded; otherwise why not (StatusCode::NoCompiler).
  const Status &status() const { return status_; }
  bool available() const { return status_.ok(); }
  /// The name or path dlopen accepted, empty when none did.
  const std::string &libraryName() const { return libraryName_; }

  /// NVRTC's own version (part of the cubin cache key).
  Expected<NvrtcVersion> version() const;
  /// The sm numbers it can compile for, ascending, e.g. {75, 80, ..., 120}.
  Expected<std::vector<int>> supportedArchs() const;

  /// Compiles \p source. On failure the message holds NVRTC's log and the
  /// source with line numbers, so it can be read without the source at hand.
  /// Thread-safe: each call has its own NVRTC program.
  Expected<CompiledKernel> compile(const std::string &source,
                                   const CompileOptions &options) const;

  Nvrtc(const Nvrtc &) = delete;
  Nvrtc &operator=(const Nvrtc &) = delete;
  ~Nvrtc();

private:
  struct EntryPoints;

  Nvrtc();
  void load();
  /// compile() once its options are checked: one NVRTC program.
  Expected<CompiledKernel> compileProgram(const std::string &source,
                                          const CompileOptions &options,
                                          const GpuArch &arch) const;

  std::unique_ptr<EntryPoints> api_;
  Status status_;
  std::string libraryName_;
  NvrtcVersion version_;
  std::vector<int> supportedArchs_;
};

/// Shorthand for Nvrtc::get().compile(source, options).
Expected<CompiledKernel> compileCuda(const std::string &source,
                                     const CompileOptions &options);

/// \p source with each line prefixed by its 1-based number, zero-padded to a
/// common width ("01 ...", as CuPy prints a failed kernel).
std::string numberSourceLines(const std::string &source);

} // namespace lina::cuda

#endif // LINA_RUNTIME_NVRTC_H
