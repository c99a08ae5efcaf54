//===- Workspace.cpp - Scratch memory a caller lends a call -----------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Runtime/Workspace.h"

#include <cstdint>
#include <cstdio>
#include <string>

namespace lina {

namespace {

std::string hexAddress(const void *pointer) {
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%llx",
                static_cast<unsigned long long>(
                    reinterpret_cast<uintptr_t>(pointer)));
  return hex;
}

} // namespace

Status checkWorkspace(size_t needed, const Workspace &workspace) {
  if (needed == 0)
    return Status();
  std::string query = workspace.sizeQuery ? std::string(" (") +
                                                workspace.sizeQuery +
                                                " says how many)"
                                          : "";
  if (!workspace.pointer)
    return Status::error(
        StatusCode::InvalidArgument,
        "this call needs a workspace of " + std::to_string(needed) +
            " bytes and none was given: pass device memory of at least " +
            std::to_string(needed) + " bytes" + query);
  if (workspace.bytes < needed)
    return Status::error(
        StatusCode::InvalidArgument,
        "this call needs a workspace of " + std::to_string(needed) +
            " bytes, got " + std::to_string(workspace.bytes) +
            ": pass device memory of at least " + std::to_string(needed) +
            " bytes" + query);
  auto address = reinterpret_cast<uintptr_t>(workspace.pointer);
  if (address % kWorkspaceAlignment != 0)
    return Status::error(
        StatusCode::InvalidArgument,
        std::string("the workspace must start at a multiple of ") +
            std::to_string(kWorkspaceAlignment) + " bytes, got " +
            hexAddress(workspace.pointer) +
            ": pass the start of an allocation");
  return Status();
}

Status checkWorkspaceApart(size_t needed, const Workspace &workspace,
                           const std::vector<TensorBytes> &tensors) {
  if (needed == 0 || !workspace.pointer)
    return Status();
  auto begin = reinterpret_cast<uintptr_t>(workspace.pointer);
  uintptr_t end = begin + needed;
  for (const TensorBytes &t : tensors) {
    if (!t.pointer || t.bytes == 0)
      continue;
    auto tensorBegin = reinterpret_cast<uintptr_t>(t.pointer);
    if (tensorBegin < end && begin < tensorBegin + t.bytes)
      return Status::error(
          StatusCode::InvalidArgument,
          "the workspace (" + hexAddress(workspace.pointer) + ", " +
              std::to_string(needed) + " bytes) overlaps '" + t.name + "' (" +
              hexAddress(t.pointer) + ", " + std::to_string(t.bytes) +
              " bytes): pass memory apart from the call's tensors");
  }
  return Status();
}

} // namespace lina
