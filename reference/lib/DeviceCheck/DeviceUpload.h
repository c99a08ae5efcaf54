//===- DeviceUpload.h - Device buffers of a GPU check -----------*- C++ -*-===//
//
// Part of lina. The inputs of a check uploaded for one launch, and outputs
// poisoned with NaN between guard bands: what the forward's and the
// backward's device checks share.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_REFERENCE_DEVICEUPLOAD_H
#define LINA_REFERENCE_DEVICEUPLOAD_H

#include "lina/Reference/DeviceCheck.h"
#include "lina/Runtime/ChunkKernel.h"
#include "lina/Runtime/Event.h"
#include "lina/Runtime/Memory.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace lina::reference {

inline void *devicePointer(const cuda::DeviceBuffer &buffer, size_t offset = 0) {
  return reinterpret_cast<void *>(
      static_cast<uintptr_t>(buffer.pointer() + offset));
}

/// Input buffers kept alive for one launch.
class DeviceInputs {
public:
  /// Copies `bytes` to a new buffer, `offset` bytes past its (aligned)
  /// start; an empty tensor stays a null pointer, which is how ForwardArgs
  /// says "not an input of this spec".
  Status upload(int device, const void *data, size_t bytes,
                const void *&pointer, size_t offset = 0) {
    pointer = nullptr;
    if (bytes == 0)
      return Status();
    Expected<cuda::DeviceBuffer> buffer =
        cuda::DeviceBuffer::allocate(device, bytes + offset);
    if (!buffer.ok())
      return buffer.status();
    LINA_RETURN_IF_ERROR(buffer->copyFromHost(data, bytes, offset));
    pointer = devicePointer(*buffer, offset);
    buffers_.push_back(std::move(buffer).value());
    return Status();
  }
  template <typename T>
  Status upload(int device, const std::vector<T> &values,
                const void *&pointer, size_t offset = 0) {
    return upload(device, values.data(), values.size() * sizeof(T), pointer,
                  offset);
  }

private:
  std::vector<cuda::DeviceBuffer> buffers_;
};

/// An output buffer between two guard bands: the body is poisoned with NaN
/// so a value the kernel never wrote is caught, the guards hold a canary so
/// a write past either end is caught. The guards are 256 bytes, which keeps
/// the body as aligned as cuMemAlloc's own pointers.
class GuardedOutput {
public:
  static constexpr size_t kGuardBytes = 256;
  static constexpr uint8_t kCanary = 0xA5;

  /// The body starts `offset` bytes past a 256-byte boundary (the leading
  /// guard is that much longer): an output sliced from a larger tensor.
  static Expected<GuardedOutput> create(int device, size_t bytes,
                                        const std::vector<uint8_t> &poison,
                                        size_t offset = 0) {
    size_t lead = kGuardBytes + offset;
    Expected<cuda::DeviceBuffer> buffer =
        cuda::DeviceBuffer::allocate(device, lead + bytes + kGuardBytes);
    if (!buffer.ok())
      return buffer.status();
    // `bytes` is a whole number of elements, each `poison` long.
    std::vector<uint8_t> image(lead, kCanary);
    image.reserve(lead + bytes + kGuardBytes);
    for (size_t i = 0; i < bytes; i += poison.size())
      image.insert(image.end(), poison.begin(), poison.end());
    image.insert(image.end(), kGuardBytes, kCanary);
    LINA_RETURN_IF_ERROR(buffer->copyFromHost(image.data(), image.size()));
    GuardedOutput output;
    output.buffer_ = std::move(buffer).value();
    output.bytes_ = bytes;
    output.lead_ = lead;
    return output;
  }

  void *pointer() const { return devicePointer(buffer_, lead_); }

  /// Downloads the body into `body`; fails when a guard byte changed.
  Status download(std::vector<uint8_t> &body, const char *name) const {
    std::vector<uint8_t> image(lead_ + bytes_ + kGuardBytes);
    LINA_RETURN_IF_ERROR(buffer_.copyToHost(image.data(), image.size()));
    auto changed = [](auto begin, auto end) {
      return std::any_of(begin, end, [](uint8_t b) { return b != kCanary; });
    };
    if (changed(image.begin(), image.begin() + lead_) ||
        changed(image.begin() + lead_ + bytes_, image.end()))
      return Status::error(StatusCode::InvalidArgument,
                           std::string("the kernel wrote outside '") + name +
                               "' (a guard byte changed)");
    body.assign(image.begin() + lead_, image.begin() + lead_ + bytes_);
    return Status();
  }

private:
  cuda::DeviceBuffer buffer_;
  size_t bytes_ = 0;
  size_t lead_ = kGuardBytes;
};


/// Copies every input to the device and points `args` at it; q, k, v, a
/// and b start `offset` bytes into their buffers.
inline Status uploadInputs(int device, const HostInputs &in, DeviceInputs &inputs,
                    ForwardArgs &args, size_t offset = 0) {
  const void *pointer = nullptr;
  LINA_RETURN_IF_ERROR(inputs.upload(device, in.q, args.q, offset));
  LINA_RETURN_IF_ERROR(inputs.upload(device, in.k, args.k, offset));
  LINA_RETURN_IF_ERROR(inputs.upload(device, in.v, args.v, offset));
  LINA_RETURN_IF_ERROR(inputs.upload(device, in.a, args.a, offset));
  LINA_RETURN_IF_ERROR(inputs.upload(device, in.b, args.b, offset));
  LINA_RETURN_IF_ERROR(inputs.upload(device, in.g, pointer));
  args.g = static_cast<const float *>(pointer);
  LINA_RETURN_IF_ERROR(inputs.upload(device, in.beta, pointer));
  args.beta = static_cast<const float *>(pointer);
  LINA_RETURN_IF_ERROR(inputs.upload(device, in.gateALog, pointer));
  args.gateALog = static_cast<const float *>(pointer);
  LINA_RETURN_IF_ERROR(inputs.upload(device, in.gateDtBias, pointer));
  args.gateDtBias = static_cast<const float *>(pointer);
  LINA_RETURN_IF_ERROR(inputs.upload(device, in.initialState, pointer));
  args.initialState = static_cast<const float *>(pointer);
  LINA_RETURN_IF_ERROR(inputs.upload(device, in.cuSeqlens, pointer));
  args.cuSeqlens = static_cast<const int64_t *>(pointer);
  return Status();
}

/// The median of `repeats` calls of `launch` (a Status-returning callable
/// that enqueues one call on `stream`), each timed with CUDA events after
/// two warm-up calls. The inputs stay the same between calls: this measures
/// the kernels with their inputs in L2 where they fit.
template <typename Launch>
Expected<double> medianEventMilliseconds(Launch launch, cuda::CUstream stream,
                                         int device, int repeats) {
  for (int i = 0; i < 2; ++i)
    LINA_RETURN_IF_ERROR(launch());
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    Expected<cuda::Event> start = cuda::Event::create(device);
    Expected<cuda::Event> end = cuda::Event::create(device);
    if (!start.ok() || !end.ok())
      return start.ok() ? end.status() : start.status();
    LINA_RETURN_IF_ERROR(start->record(stream));
    LINA_RETURN_IF_ERROR(launch());
    LINA_RETURN_IF_ERROR(end->record(stream));
    Expected<float> ms = cuda::Event::elapsedMilliseconds(*start, *end);
    if (!ms.ok())
      return ms.status();
    times.push_back(*ms);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

} // namespace lina::reference

#endif // LINA_REFERENCE_DEVICEUPLOAD_H
