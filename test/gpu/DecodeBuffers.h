//===- DecodeBuffers.h - lina-decode-suite's device buffers -----*- C++ -*-===//
//
// Part of lina. Guard-banded device buffers and the upload of one call's
// inputs, shared by the suite's runners (DecodeRun.cpp,
// DecodeServingRun.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TEST_GPU_DECODEBUFFERS_H
#define LINA_TEST_GPU_DECODEBUFFERS_H

#include "lina/Reference/DeviceCheck.h"
#include "lina/Runtime/DecodeKernel.h"
#include "lina/Runtime/Memory.h"
#include "lina/Runtime/Status.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace lina::decodesuite {

inline Status fail(const std::string &message) {
  return Status::error(StatusCode::InvalidArgument, message);
}

/// A device buffer between two 256-byte guard bands holding a canary.
class Guarded {
public:
  static constexpr size_t kGuard = 256;
  static constexpr uint8_t kCanary = 0xA5;

  static Expected<Guarded> create(int device, const void *body, size_t bytes) {
    Expected<cuda::DeviceBuffer> buffer =
        cuda::DeviceBuffer::allocate(device, bytes + 2 * kGuard);
    if (!buffer.ok())
      return buffer.status();
    std::vector<uint8_t> image(bytes + 2 * kGuard, kCanary);
    std::memcpy(image.data() + kGuard, body, bytes);
    LINA_RETURN_IF_ERROR(buffer->copyFromHost(image.data(), image.size()));
    Guarded g;
    g.buffer_ = std::make_shared<cuda::DeviceBuffer>(std::move(*buffer));
    g.bytes_ = bytes;
    return g;
  }

  /// `count` copies of `pattern` (a NaN) between the guards.
  static Expected<Guarded> poisoned(int device, size_t count,
                                    const std::vector<uint8_t> &pattern) {
    std::vector<uint8_t> body;
    body.reserve(count * pattern.size());
    for (size_t i = 0; i < count; ++i)
      body.insert(body.end(), pattern.begin(), pattern.end());
    return create(device, body.data(), body.size());
  }

  void *pointer() const {
    return reinterpret_cast<void *>(
        static_cast<uintptr_t>(buffer_->pointer() + kGuard));
  }

  Status download(std::vector<uint8_t> &body, const char *name) const {
    std::vector<uint8_t> image(bytes_ + 2 * kGuard);
    LINA_RETURN_IF_ERROR(buffer_->copyToHost(image.data(), image.size()));
    for (size_t i = 0; i < kGuard; ++i)
      if (image[i] != kCanary || image[kGuard + bytes_ + i] != kCanary)
        return fail(std::string("the kernel wrote outside '") + name + "'");
    body.assign(image.begin() + kGuard, image.begin() + kGuard + bytes_);
    return Status();
  }

private:
  std::shared_ptr<cuda::DeviceBuffer> buffer_;
  size_t bytes_ = 0;
};

/// Uploaded inputs of one step; empty host tensors stay null pointers.
struct StepBuffers {
  std::vector<Guarded> inputs;

  template <typename T>
  Status upload(int device, const std::vector<T> &host, const void *&ptr) {
    ptr = nullptr;
    if (host.empty())
      return Status();
    Expected<Guarded> g =
        Guarded::create(device, host.data(), host.size() * sizeof(T));
    if (!g.ok())
      return g.status();
    ptr = g->pointer();
    inputs.push_back(std::move(*g));
    return Status();
  }

  Status uploadStep(int device, const reference::HostInputs &in,
                    DecodeArgs &args) {
    const void *p = nullptr;
    LINA_RETURN_IF_ERROR(upload(device, in.q, args.q));
    LINA_RETURN_IF_ERROR(upload(device, in.k, args.k));
    LINA_RETURN_IF_ERROR(upload(device, in.v, args.v));
    LINA_RETURN_IF_ERROR(upload(device, in.a, args.a));
    LINA_RETURN_IF_ERROR(upload(device, in.b, args.b));
    LINA_RETURN_IF_ERROR(upload(device, in.g, p));
    args.g = static_cast<const float *>(p);
    LINA_RETURN_IF_ERROR(upload(device, in.beta, p));
    args.beta = static_cast<const float *>(p);
    LINA_RETURN_IF_ERROR(upload(device, in.gateALog, p));
    args.gateALog = static_cast<const float *>(p);
    LINA_RETURN_IF_ERROR(upload(device, in.gateDtBias, p));
    args.gateDtBias = static_cast<const float *>(p);
    return Status();
  }
};

} // namespace lina::decodesuite

#endif // LINA_TEST_GPU_DECODEBUFFERS_H
