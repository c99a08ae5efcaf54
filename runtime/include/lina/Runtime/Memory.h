//===- Memory.h - Device memory owned by lina -------------------*- C++ -*-===//
//
// Part of lina. Buffers the runtime allocates itself: the autotuner's inputs
// and scratch, and tests. Tensors that belong to the caller are never wrapped
// here; kernels receive their raw pointers.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_RUNTIME_MEMORY_H
#define LINA_RUNTIME_MEMORY_H

#include "lina/Runtime/CudaApi.h"
#include "lina/Runtime/Status.h"

#include <cstddef>

namespace lina::cuda {

/// cuMemAlloc'd memory on one GPU, freed when destroyed.
class DeviceBuffer {
public:
  /// Allocates \p bytes on GPU \p deviceOrdinal (making its primary context
  /// current on this thread).
  static Expected<DeviceBuffer> allocate(int deviceOrdinal, size_t bytes);

  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer &&other) noexcept;
  DeviceBuffer &operator=(DeviceBuffer &&other) noexcept;
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer();

  CUdeviceptr pointer() const { return pointer_; }
  size_t size() const { return size_; }

  /// Copies \p bytes from host memory into the buffer, \p offset bytes past
  /// its start (blocking).
  Status copyFromHost(const void *source, size_t bytes, size_t offset = 0);
  /// Copies \p bytes from the start of the buffer to host memory (blocking).
  Status copyToHost(void *destination, size_t bytes) const;

private:
  DeviceBuffer(CUdeviceptr pointer, size_t size)
      : pointer_(pointer), size_(size) {}

  CUdeviceptr pointer_ = 0;
  size_t size_ = 0;
};

} // namespace lina::cuda

#endif // LINA_RUNTIME_MEMORY_H
