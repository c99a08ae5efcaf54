//===- SideStream.cpp - A stream beside the caller's -----------------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Runtime/SideStream.h"

#include "lina/Runtime/Device.h"
#include "lina/Runtime/Driver.h"

#include <utility>

namespace lina::cuda {

Expected<SideStream> SideStream::create(int deviceOrdinal) {
  LINA_RETURN_IF_ERROR(makeCurrent(deviceOrdinal));
  int least = 0, greatest = 0;
  LINA_RETURN_IF_ERROR(
      LINA_CU(cuCtxGetStreamPriorityRange(&least, &greatest)));
  SideStream side;
  LINA_RETURN_IF_ERROR(LINA_CU(cuStreamCreateWithPriority(
      &side.stream_, CU_STREAM_NON_BLOCKING, greatest)));
  // Timing off: these events only order streams, and such events are
  // cheaper to record and wait for.
  LINA_RETURN_IF_ERROR(
      LINA_CU(cuEventCreate(&side.forked_, CU_EVENT_DISABLE_TIMING)));
  LINA_RETURN_IF_ERROR(
      LINA_CU(cuEventCreate(&side.joined_, CU_EVENT_DISABLE_TIMING)));
  return side;
}

SideStream::SideStream(SideStream &&other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)),
      forked_(std::exchange(other.forked_, nullptr)),
      joined_(std::exchange(other.joined_, nullptr)) {}

SideStream &SideStream::operator=(SideStream &&other) noexcept {
  // Our old handles, if any, are destroyed with \p other.
  std::swap(stream_, other.stream_);
  std::swap(forked_, other.forked_);
  std::swap(joined_, other.joined_);
  return *this;
}

SideStream::~SideStream() {
  const Driver &driver = Driver::get();
  if (forked_)
    (void)driver.cuEventDestroy_v2(forked_);
  if (joined_)
    (void)driver.cuEventDestroy_v2(joined_);
  if (stream_)
    (void)driver.cuStreamDestroy_v2(stream_);
}

Status SideStream::fork(CUstream caller) const {
  LINA_RETURN_IF_ERROR(LINA_CU(cuEventRecord(forked_, caller)));
  return LINA_CU(cuStreamWaitEvent(stream_, forked_, 0));
}

Status SideStream::join(CUstream caller) const {
  LINA_RETURN_IF_ERROR(LINA_CU(cuEventRecord(joined_, stream_)));
  return LINA_CU(cuStreamWaitEvent(caller, joined_, 0));
}

Expected<bool> isCapturing(CUstream stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  LINA_RETURN_IF_ERROR(LINA_CU(cuStreamIsCapturing(stream, &status)));
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

} // namespace lina::cuda
