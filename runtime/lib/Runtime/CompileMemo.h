//===- CompileMemo.h - Compiles kept across test processes ----*- C++ -*-===//
//
// Part of lina. With LINA_COMPILE_MEMO_DIR set, a successful compile (NVRTC's
// or the emulated device's host compile) is written to a file in that
// directory named by a hash of everything it depends on, and a later
// compile of the same program, in any process, reads it instead of
// compiling again. It is for test runs, which compile the same kernels many
// times over: the sanitizer build's tests compile what the Release build's
// did, and the emulated suite runs once in each thread order. lina's own
// cubin cache (lina/Autotune/CubinStore.h) is what serves users.
//
// A compile that fails is never remembered. A file that cannot be read
// whole, or that another program wrote, is a miss; a file that cannot be
// written is skipped, since the compile it would have saved has its result.
// Files are written under a temporary name and renamed, so processes that
// compile the same program at once each read a whole file or none.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_RUNTIME_COMPILEMEMO_H
#define LINA_RUNTIME_COMPILEMEMO_H

#include "lina/Runtime/Nvrtc.h"

#include <cstdint>
#include <optional>
#include <string>

namespace lina::cuda {

class CompileMemo {
public:
  /// A memo of compiling \p source with \p options by \p compiler (a text
  /// naming the compiler and its version, and anything else the output
  /// depends on beyond the source and options). Does nothing unless
  /// LINA_COMPILE_MEMO_DIR names a directory.
  CompileMemo(const std::string &compiler, const std::string &source,
              const CompileOptions &options);

  /// What an earlier compile of the same program produced, if remembered.
  std::optional<CompiledKernel> lookup() const;
  /// Remembers \p compiled for later lookups.
  void store(const CompiledKernel &compiled) const;

  /// The file this program's compile is kept in; empty when the memo is
  /// off.
  const std::string &path() const { return path_; }

private:
  std::string path_;
  uint64_t first_ = 0, second_ = 0;
};

} // namespace lina::cuda

#endif // LINA_RUNTIME_COMPILEMEMO_H
