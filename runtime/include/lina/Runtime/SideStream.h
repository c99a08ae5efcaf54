//===- SideStream.h - A stream beside the caller's --------------*- C++ -*-===//
//
// Part of lina. ChunkKernel runs a split scan beside its prepare kernel (the
// scan waiting on flags the prepare kernel sets) where the scan leaves
// multiprocessors idle; the two kernels need two streams for that, forked
// from the caller's and joined back into it.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_RUNTIME_SIDESTREAM_H
#define LINA_RUNTIME_SIDESTREAM_H

#include "lina/Runtime/CudaApi.h"
#include "lina/Runtime/Status.h"

namespace lina::cuda {

/// A second stream for work that must run concurrently with the caller's:
/// fork() makes it wait for what the caller's stream has queued so far,
/// join() makes the caller's stream wait for what it has queued. It does not
/// synchronise implicitly with the legacy default stream (a scan queued on
/// it first would otherwise hold back the prepare kernel it waits for), and
/// it has the device's highest priority, so its CTAs are placed before the
/// caller's stream's. Both work under CUDA graph capture.
class SideStream {
public:
  /// Creates the stream and its two events in GPU \p deviceOrdinal's primary
  /// context (making it current on this thread).
  static Expected<SideStream> create(int deviceOrdinal);

  SideStream() = default;
  SideStream(SideStream &&other) noexcept;
  SideStream &operator=(SideStream &&other) noexcept;
  SideStream(const SideStream &) = delete;
  SideStream &operator=(const SideStream &) = delete;
  ~SideStream();

  CUstream handle() const { return stream_; }
  /// Work queued on this stream from now on starts after the work queued on
  /// \p caller so far.
  Status fork(CUstream caller) const;
  /// Work queued on \p caller from now on starts after the work queued on
  /// this stream so far.
  Status join(CUstream caller) const;

private:
  CUstream stream_ = nullptr;
  CUevent forked_ = nullptr, joined_ = nullptr;
};

/// Whether \p stream is being captured into a CUDA graph (a replayed graph
/// repeats its kernels' arguments, so per-call values must not be baked in).
Expected<bool> isCapturing(CUstream stream);

} // namespace lina::cuda

#endif // LINA_RUNTIME_SIDESTREAM_H
