//===- Event.cpp - CUDA events for timing kernels -------------------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Runtime/Event.h"

#include "lina/Runtime/Device.h"
#include "lina/Runtime/Driver.h"

#include <utility>

namespace lina::cuda {

Expected<Event> Event::create(int deviceOrdinal) {
  LINA_RETURN_IF_ERROR(makeCurrent(deviceOrdinal));
  CUevent event = nullptr;
  LINA_RETURN_IF_ERROR(LINA_CU(cuEventCreate(&event, CU_EVENT_DEFAULT)));
  return Event(event);
}

Event::Event(Event &&other) noexcept
    : event_(std::exchange(other.event_, nullptr)) {}

Event &Event::operator=(Event &&other) noexcept {
  // Our old event, if any, is destroyed with \p other.
  std::swap(event_, other.event_);
  return *this;
}

Event::~Event() {
  if (event_)
    (void)Driver::get().cuEventDestroy_v2(event_);
}

Status Event::record(CUstream stream) const {
  return LINA_CU(cuEventRecord(event_, stream));
}

Status Event::synchronize() const {
  return LINA_CU(cuEventSynchronize(event_));
}

Expected<float> Event::elapsedMilliseconds(const Event &start,
                                           const Event &end) {
  LINA_RETURN_IF_ERROR(end.synchronize());
  float milliseconds = 0;
  LINA_RETURN_IF_ERROR(
      LINA_CU(cuEventElapsedTime_v2(&milliseconds, start.event_, end.event_)));
  return milliseconds;
}

} // namespace lina::cuda
