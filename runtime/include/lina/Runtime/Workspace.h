//===- Workspace.h - Scratch memory a caller lends a call -------*- C++ -*-===//
//
// Part of lina. The chunk-parallel forward (materialize, split, segments)
// and the backward keep per-chunk records between their kernels. A kernel
// can hold that scratch itself (allocated on first use, grown on a larger
// call), or the caller can lend it for one call: memory from its own
// allocator, ordered on the call's stream, which is what a CUDA graph
// capture needs (the graph's pool owns it, and no later call frees it) and
// what two streams need to run at once.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_RUNTIME_WORKSPACE_H
#define LINA_RUNTIME_WORKSPACE_H

#include "lina/Runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace lina {

/// The alignment a lent workspace must start at: the records inside it are
/// laid out at multiples of 256 bytes (cuMemAlloc's and torch's caching
/// allocator's guarantee), and the kernels read them with wide loads.
inline constexpr size_t kWorkspaceAlignment = 256;

/// Device memory on the call's GPU lent to one call. The call's kernels use
/// its first bytes (as many as the call's size query says) and keep nothing
/// after they finish; it must stay allocated until the stream has passed
/// them.
struct Workspace {
  void *pointer = nullptr;
  size_t bytes = 0;
  /// The function the lender asks for a call's size, named when the
  /// workspace is refused (the C API's, the C++ runtime's); may be null.
  const char *sizeQuery = nullptr;
};

/// OK when `workspace` can hold a call that needs `needed` bytes: large
/// enough and aligned (a workspace of 0 bytes, or none, where nothing is
/// needed). Otherwise InvalidArgument naming the size needed and the
/// workspace's sizeQuery.
Status checkWorkspace(size_t needed, const Workspace &workspace);

/// One tensor of a call as a range of bytes (checkWorkspaceApart).
struct TensorBytes {
  const char *name = "";
  const void *pointer = nullptr;
  uint64_t bytes = 0;
};

/// OK unless the `needed` bytes at the start of `workspace` overlap one of
/// `tensors` (absent ones, null, are skipped): the kernels write the
/// workspace while they read and write the call's tensors, so a workspace
/// that shares memory with one corrupts both. InvalidArgument naming the
/// tensor otherwise.
Status checkWorkspaceApart(size_t needed, const Workspace &workspace,
                           const std::vector<TensorBytes> &tensors);

} // namespace lina

#endif // LINA_RUNTIME_WORKSPACE_H
