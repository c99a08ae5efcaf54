//===- Event.h - CUDA events for timing kernels -----------------*- C++ -*-===//
//
// Part of lina. The autotuner times candidates with events recorded on the
// stream around the launches, not with host clocks, so launch overhead and
// other streams' work stay out of the measurement.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_RUNTIME_EVENT_H
#define LINA_RUNTIME_EVENT_H

#include "lina/Runtime/CudaApi.h"
#include "lina/Runtime/Status.h"

namespace lina::cuda {

/// A CUDA event with timing enabled, destroyed with the object.
class Event {
public:
  /// Creates an event in GPU \p deviceOrdinal's primary context (making it
  /// current on this thread).
  static Expected<Event> create(int deviceOrdinal);

  Event() = default;
  Event(Event &&other) noexcept;
  Event &operator=(Event &&other) noexcept;
  Event(const Event &) = delete;
  Event &operator=(const Event &) = delete;
  ~Event();

  CUevent handle() const { return event_; }

  /// Records the event after the work queued so far on \p stream.
  Status record(CUstream stream = nullptr) const;
  /// Waits on the host until the recorded work is done.
  Status synchronize() const;

  /// Milliseconds between two recorded events (about 0.5 us resolution);
  /// waits for \p end first.
  static Expected<float> elapsedMilliseconds(const Event &start,
                                             const Event &end);

private:
  explicit Event(CUevent event) : event_(event) {}

  CUevent event_ = nullptr;
};

} // namespace lina::cuda

#endif // LINA_RUNTIME_EVENT_H
