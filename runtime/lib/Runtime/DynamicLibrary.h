//===- DynamicLibrary.h - dlopen with the reason kept -----------*- C++ -*-===//
//
// Part of lina. Internal to the runtime: the one place that calls dlopen, so
// the driver and NVRTC loaders report failures the same way.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_LIB_RUNTIME_DYNAMICLIBRARY_H
#define LINA_LIB_RUNTIME_DYNAMICLIBRARY_H

#include <string>
#include <vector>

namespace lina::detail {

/// A library handle that is never closed: lina's libraries hand out contexts
/// and modules that may be used until the process exits.
struct DynamicLibrary {
  void *handle = nullptr;
  /// The name or path that dlopen accepted.
  std::string name;

  /// The address of \p symbol, or null.
  void *symbol(const char *symbol) const;
};

/// Opens the first of \p candidates that dlopen accepts. On failure returns a
/// library with a null handle and stores in \p error each candidate's dlerror,
/// one per line, or only dlerror when there is a single candidate.
DynamicLibrary openFirst(const std::vector<std::string> &candidates,
                         std::string &error);

} // namespace lina::detail

#endif // LINA_LIB_RUNTIME_DYNAMICLIBRARY_H
