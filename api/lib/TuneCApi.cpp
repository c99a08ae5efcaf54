//===- TuneCApi.cpp - lina_tune: a tune from a program -----------------===//
//
// Part of lina. The C face of TuneSession: the same tune as `lina tune`, in
// the same cache, so that the kernels this process and later ones create
// for the shape's bucket use its winner.
//
//===----------------------------------------------------------------------===//
#include "lina/lina_c.h"

#include "CApiSupport.h"

#include "lina/Autotune/ScheduleKnobs.h"
#include "lina/Autotune/TuneSession.h"
#include "lina/Dialect/Lina/IR/SpecConversion.h"

#include <algorithm>
#include <cstring>
#include <string>

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
  out.wgmma = s.wgmma ? LINA_WGMMA_ON : LINA_WGMMA_OFF;
  return out;
}

/// Copies `text` into `out`, cut to fit with "..." at the end.
template <size_t N> void copyText(char (&out)[N], const std::string &text) {
  std::string cut = text.size() < N ? text : text.substr(0, N - 4) + "...";
  std::memcpy(out, cut.c_str(), cut.size() + 1);
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
  if (mode != LINA_TUNE_FAST && mode != LINA_TUNE_FULL)
    return fail(LINA_INVALID_ARGUMENT,
                "lina_tune: mode must be LINA_TUNE_FAST or LINA_TUNE_FULL, "
                "got " +
                    std::to_string(mode));
  lina::Spec spec;
  std::string error;
  if (!lina::parseSpecText(spec_text, "spec", spec, error))
    return fail(LINA_INVALID_ARGUMENT, error);

  lina::TuneRequest request;
  request.batch = batch;
  request.seqLen = seq_len;
  request.mode =
      mode == LINA_TUNE_FULL ? lina::TuneMode::Full : lina::TuneMode::Fast;
  request.device = device;
  request.simulate = simulate != 0;
  lina::Expected<lina::TuneSession> session =
      lina::TuneSession::open(spec, request);
  if (!session.ok()) {
    lina_status status = fromStatus(session.status());
    if (status == LINA_NO_DRIVER)
      lastError += " (lina_tune times candidates on a GPU; simulate = 1 "
                   "tunes on the cost model without one)";
    return status;
  }
  lina::Expected<lina::TuneOutcome> ran = session->run();
  if (!ran.ok())
    return fromStatus(ran.status());
  const lina::TuneOutcome &outcome = *ran;
  out->candidates = int64_t(outcome.candidates);
  out->pruned = int64_t(outcome.pruned);
  out->tried = int64_t(outcome.result.tried);
  out->recorded = int64_t(outcome.result.recorded);
  out->saved = outcome.saved ? 1 : 0;
  copyText(out->not_saved_reason, outcome.notSavedReason);
  if (outcome.winner && outcome.winner->timeMs) {
    out->schedule =
        toCSchedule(lina::fromCacheSchedule(outcome.winner->schedule));
    out->time_ms = *outcome.winner->timeMs;
  }
  // Kernels this process created for an open schedule remembered which
  // schedule their bucket got; the tune may have changed it.
  forgetChosenSchedules();
  if (outcome.contextLost)
    return fail(LINA_DRIVER_ERROR, "lina_tune: " + outcome.error);
  if (!outcome.error.empty()) {
    // The first failure says most: every candidate failed, often alike.
    std::string first;
    for (const lina::TuneVisit &visit : outcome.visited)
      if (visit.candidate.status != lina::cache::CandidateStatus::Ok) {
        first =
            lina::describe(lina::fromCacheSchedule(visit.candidate.schedule)) +
            ": " + lina::cache::toString(visit.candidate.status) +
            (visit.candidate.error.empty()
                 ? ""
                 : ", " + visit.candidate.error.substr(
                              0, visit.candidate.error.find('\n')));
        break;
      }
    return fail(LINA_INTERNAL_ERROR,
                "lina_tune: " + outcome.error +
                    (first.empty() ? "" : " (the first, " + first + ")"));
  }
  lastError.clear();
  return LINA_OK;
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
