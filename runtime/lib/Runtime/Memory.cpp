//===- Memory.cpp - Device memory owned by lina ---------------------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Runtime/Memory.h"

#include "lina/Runtime/Device.h"
#include "lina/Runtime/Driver.h"

#include <utility>

namespace lina::cuda {

static Status tooLarge(const std::string &what, size_t bytes, size_t size) {
  return Status::error(StatusCode::InvalidArgument,
                       what + " of " + std::to_string(bytes) +
                           " bytes does not fit a buffer of " +
                           std::to_string(size) + " bytes");
}

Expected<DeviceBuffer> DeviceBuffer::allocate(int deviceOrdinal, size_t bytes) {
  if (bytes == 0)
    return Status::error(StatusCode::InvalidArgument,
                         "cannot allocate a device buffer of 0 bytes");
  LINA_RETURN_IF_ERROR(makeCurrent(deviceOrdinal));
  CUdeviceptr pointer = 0;
  LINA_RETURN_IF_ERROR(LINA_CU(cuMemAlloc_v2(&pointer, bytes)));
  return DeviceBuffer(pointer, bytes);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer &&other) noexcept
    : pointer_(std::exchange(other.pointer_, 0)),
      size_(std::exchange(other.size_, 0)) {}

DeviceBuffer &DeviceBuffer::operator=(DeviceBuffer &&other) noexcept {
  // Our old memory, if any, is freed when \p other is destroyed.
  std::swap(pointer_, other.pointer_);
  std::swap(size_, other.size_);
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  // A destructor cannot report; a failed free leaks until the context ends.
  if (pointer_)
    (void)Driver::get().cuMemFree_v2(pointer_);
}

Status DeviceBuffer::copyFromHost(const void *source, size_t bytes,
                                  size_t offset) {
  if (offset > size_ || bytes > size_ - offset)
    return tooLarge(offset == 0 ? std::string("a copy to the device")
                                : "a copy to the device at offset " +
                                      std::to_string(offset),
                    bytes, size_);
  return LINA_CU(cuMemcpyHtoD_v2(pointer_ + offset, source, bytes));
}

Status DeviceBuffer::copyToHost(void *destination, size_t bytes) const {
  if (bytes > size_)
    return tooLarge("a copy from the device", bytes, size_);
  return LINA_CU(cuMemcpyDtoH_v2(destination, pointer_, bytes));
}

} // namespace lina::cuda
