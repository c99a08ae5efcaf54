//===- DynamicLibrary.cpp - dlopen with the reason kept -------------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "DynamicLibrary.h"

#include <dlfcn.h>

namespace lina::detail {

void *DynamicLibrary::symbol(const char *symbol) const {
  return handle ? dlsym(handle, symbol) : nullptr;
}

DynamicLibrary openFirst(const std::vector<std::string> &candidates,
                         std::string &error) {
  std::vector<std::string> reasons;
  for (const std::string &candidate : candidates) {
    // RTLD_LOCAL: a second CUDA runtime in the process (PyTorch's) must not
    // see our symbols, nor we theirs.
    if (void *handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL))
      return DynamicLibrary{handle, candidate};
    const char *reason = dlerror();
    reasons.push_back(reason ? reason : candidate + ": unknown dlopen error");
  }
  error.clear();
  for (size_t i = 0; i < reasons.size(); ++i)
    error += (i ? "\n" : "") + reasons[i];
  return DynamicLibrary{};
}

} // namespace lina::detail
