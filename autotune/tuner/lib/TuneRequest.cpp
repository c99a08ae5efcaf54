//===- TuneRequest.cpp - The checks every tune's request passes --------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "TuneSessionCore.h"

namespace lina::tunesession {

Status checkRequest(const TuneRequest &request) {
  // A tune times calls of T tokens: with none there is nothing to time, and
  // its results would be recorded for the t=1..256 bucket all the same.
  if (request.batch < 1 || request.seqLen < 1)
    return invalid("a tune needs batch and seq_len of at least 1, got " +
                   std::to_string(request.batch) + " and " +
                   std::to_string(request.seqLen));
  if (request.mode == TuneMode::Fast && request.budget < 1)
    return invalid("a fast tune needs a budget of at least 1 candidate");
  if (request.repeats < 1 || request.warmup < 0)
    return invalid("a tune needs at least 1 timed call and no negative "
                   "number of warm-up calls");
  return Status();
}

} // namespace lina::tunesession
