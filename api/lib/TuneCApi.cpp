//===- TuneCApi.cpp - lina_tune: a tune from a program -----------------===//
//
// Part of lina. The C face of TuneSession and, with LINA_TUNE_BACKWARD,
// BackwardTuneSession: the same tune as `lina tune [--backward]`, in the
// same cache, so that the kernels this process and later ones create for
// the shape's bucket use its winner.
//
//===----------------------------------------------------------------------===//
#include "lina/lina_c.h"

#include "BackwardSchedules.h"
#include "CApiSupport.h"

#include "lina/Autotune/BackwardTuneSession.h"
#include "lina/Autotune/ScheduleKnobs.h"
#include "lina/Autotune/TuneSession.h"
#include "lina/Dialect/Lina/IR/SpecConversion.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

using namespace lina::capi;

namespace {

lina_schedule toCSchedule(const lina::ScheduleOptions &s) {
  lina_schedule out = {};
  out.chunk_size = s.chunkSize;
  out.tile_v = s.tileV;
  out.warps = s.warps;
  out.strategy = s.strategy == lina::Strategy::FusedScan ? LINA_STRATEGY_FUSED
                 : s.strategy == lina::Strategy::Materialize
                     ? LINA_STRATEGY_MATERIALIZE
                     : LINA_STRATEGY_SPLIT;
  out.prefetch = s.prefetch ? LINA_PREFETCH_ON : LINA_PREFETCH_OFF;
  out.segments = s.segments;
  out.mma = s.warpgroup ? LINA_MMA_WARPGROUP : LINA_MMA_WARP;
  return out;
}

/// Copies `text` into `out`, cut to fit with "..." at the end.
template <size_t N> void copyText(char (&out)[N], const std::string &text) {
  std::string cut = text.size() < N ? text : text.substr(0, N - 4) + "...";
  std::memcpy(out, cut.c_str(), cut.size() + 1);
}

/// The first failed candidate of `visited`, as "C16 tv32 w4: mismatch,
/// why", or "" when none failed: it says most when every one failed alike.
template <typename Schedule>
std::string firstFailure(const std::vector<lina::TuneVisit> &visited,
                         Schedule (*fromCache)(const lina::cache::Schedule &)) {
  for (const lina::TuneVisit &visit : visited)
    if (visit.candidate.status != lina::cache::CandidateStatus::Ok)
      return lina::describe(fromCache(visit.candidate.schedule)) + ": " +
             lina::cache::toString(visit.candidate.status) +
             (visit.candidate.error.empty()
                  ? ""
                  : ", " + visit.candidate.error.substr(
                               0, visit.candidate.error.find('\n')));
  return "";
}

/// The counts, the winner and whether it was saved, of either tune's
/// outcome; then its failure as a status.
template <typename Schedule>
lina_status report(const lina::BasicTuneOutcome<Schedule> &outcome,
                   lina_schedule winner, lina_tune_result *out,
                   Schedule (*fromCache)(const lina::cache::Schedule &)) {
  out->candidates = int64_t(outcome.candidates);
  out->pruned = int64_t(outcome.pruned);
  out->tried = int64_t(outcome.result.tried);
  out->recorded = int64_t(outcome.result.recorded);
  out->saved = outcome.saved ? 1 : 0;
  copyText(out->not_saved_reason, outcome.notSavedReason);
  if (outcome.winner && outcome.winner->timeMs) {
    out->schedule = winner;
    out->time_ms = *outcome.winner->timeMs;
  }
  if (outcome.contextLost)
    return fail(LINA_DRIVER_ERROR, "lina_tune: " + outcome.error);
  if (!outcome.error.empty()) {
    std::string first = firstFailure(outcome.visited, fromCache);
    return fail(LINA_INTERNAL_ERROR,
                "lina_tune: " + outcome.error +
                    (first.empty() ? "" : " (the first, " + first + ")"));
  }
  lastError.clear();
  return LINA_OK;
}

lina::BackwardScheduleOptions
backwardFromCache(const lina::cache::Schedule &s) {
  return lina::backwardFromCacheSchedule(s).value_or(
      lina::BackwardScheduleOptions{});
}

lina_status openFailure(const lina::Status &status) {
  lina_status code = fromStatus(status);
  if (code == LINA_NO_DRIVER)
    lastError += " (lina_tune times candidates on a GPU; simulate = 1 "
                 "tunes on the cost model without one)";
  return code;
}

lina_status tuneBackward(const lina::Spec &spec,
                         const lina::TuneRequest &request,
                         lina_tune_result *out) {
  lina::Expected<lina::BackwardTuneSession> session =
      lina::BackwardTuneSession::open(spec, request);
  if (!session.ok())
    return openFailure(session.status());
  lina::Expected<lina::BackwardTuneOutcome> ran = session->run();
  if (!ran.ok())
    return fromStatus(ran.status());
  lina_schedule winner = {};
  if (ran->winner) {
    lina::BackwardScheduleOptions s = backwardFromCache(ran->winner->schedule);
    winner.chunk_size = s.chunkSize;
    winner.tile_v = s.tileV;
    winner.warps = s.warps;
  }
  // Backward kernels created for an open schedule remembered their
  // bucket's schedule; the tune may have changed it.
  forgetBackwardSchedules();
  return report(*ran, winner, out, backwardFromCache);
}

lina_status tune(const char *spec_text, int64_t batch, int64_t seq_len,
                 int mode, int device, int simulate,
                 lina_tune_result *out) {
  if (!spec_text || !out)
    return fail(LINA_INVALID_ARGUMENT,
                "lina_tune: spec_text and out must not be NULL");
  *out = lina_tune_result{};
  // A tune times calls of seq_len tokens: with none there is nothing to
  // time.
  if (batch < 1 || seq_len < 1)
    return fail(LINA_INVALID_ARGUMENT,
                "lina_tune: batch and seq_len must be at least 1, got " +
                    std::to_string(batch) + " and " + std::to_string(seq_len));
  bool backward = (mode & LINA_TUNE_BACKWARD) != 0;
  int search = mode & ~LINA_TUNE_BACKWARD;
  if (search != LINA_TUNE_FAST && search != LINA_TUNE_FULL)
    return fail(LINA_INVALID_ARGUMENT,
                "lina_tune: mode must be LINA_TUNE_FAST or LINA_TUNE_FULL, "
                "got " +
                    std::to_string(mode) +
                    " (either may be or'ed with LINA_TUNE_BACKWARD)");
  lina::Spec spec;
  std::string error;
  if (!lina::parseSpecText(spec_text, "spec", spec, error))
    return fail(LINA_INVALID_ARGUMENT, error);

  lina::TuneRequest request;
  request.batch = batch;
  request.seqLen = seq_len;
  request.mode =
      search == LINA_TUNE_FULL ? lina::TuneMode::Full : lina::TuneMode::Fast;
  request.device = device;
  request.simulate = simulate != 0;
  if (backward)
    return tuneBackward(spec, request, out);
  lina::Expected<lina::TuneSession> session =
      lina::TuneSession::open(spec, request);
  if (!session.ok())
    return openFailure(session.status());
  lina::Expected<lina::TuneOutcome> ran = session->run();
  if (!ran.ok())
    return fromStatus(ran.status());
  lina_schedule winner = {};
  if (ran->winner)
    winner = toCSchedule(lina::fromCacheSchedule(ran->winner->schedule));
  // Kernels this process created for an open schedule remembered which
  // schedule their bucket got; the tune may have changed it.
  forgetChosenSchedules();
  return report(*ran, winner, out, lina::fromCacheSchedule);
}

} // namespace

extern "C" {

lina_status lina_tune(const char *spec_text, int64_t batch, int64_t seq_len,
                      int mode, int device, int simulate,
                      lina_tune_result *out) {
  return guarded([&] {
    return tune(spec_text, batch, seq_len, mode, device, simulate, out);
  });
}

} // extern "C"
