//===- TuneRequest.h - What a tune is asked, and what it found --*- C++ -*-===//
//
// Part of lina. The request and the outcome of a tune, the same for every
// kernel a session tunes (BasicTuneSession.h): the forward's chunk kernel
// (TuneSession.h) and the backward's kernels (BackwardTuneSession.h) take
// one TuneRequest, and answer with a BasicTuneOutcome of their schedule.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_TUNEREQUEST_H
#define LINA_AUTOTUNE_TUNEREQUEST_H

#include "lina/Autotune/Cache.h"
#include "lina/Autotune/Tuner.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace lina {

enum class TuneMode {
  /// Coordinate descent from the default schedule, at most `budget`
  /// candidates (tuneFast).
  Fast,
  /// Every viable candidate (tuneFull).
  Full,
};

struct TuneRequest {
  /// The calls to tune for: `batch` sequences of `seqLen` tokens. Both at
  /// least 1 (a call of no tokens has nothing to time).
  int64_t batch = 0, seqLen = 0;
  /// Tune for packed varlen calls, as a spec with varlen = true does: the
  /// candidates are timed on the `batch` sequences packed into one row with
  /// cu_seqlens (the sequences as long as each other: the bucket holds
  /// their number and the longest), and the results are recorded under the
  /// varlen spec's key, which varlen calls look up first.
  bool varlen = false;
  TuneMode mode = TuneMode::Fast;
  /// Fast: the most candidates to look at, at least 1.
  size_t budget = 12;
  /// The GPU's ordinal.
  int device = 0;
  /// Time candidates with the cost model instead of the GPU, which then
  /// need not exist; recorded under GPU "simulated", which no device matches
  /// (CostModel.h).
  bool simulate = false;
  /// Only open the session (the space, the key): no GPU is needed, and
  /// run() refuses.
  bool dryRun = false;
  /// Stop after this many new trials (0: no limit), as if killed.
  size_t maxNewTrials = 0;
  /// On the GPU: untimed calls, then timed ones (their median), per
  /// candidate; parallel compiles (0: one per CPU core).
  int warmup = 3, repeats = 10;
  unsigned jobs = 0;
  /// Where to record; nullptr: the process's cache (TuneStore).
  cache::Cache *cache = nullptr;
  /// Each candidate, as it is looked at.
  std::function<void(const TuneEvent &)> progress;
  /// A line about what the tune does between candidates (a full sweep on a
  /// GPU compiles its whole space first, which takes minutes).
  std::function<void(const std::string &)> note;
};

/// A candidate a tune looked at: its record, and whether it was read back
/// from the cache rather than tried.
struct TuneVisit {
  cache::Candidate candidate;
  bool recorded = false;
};

template <typename Schedule> struct BasicTuneOutcome {
  /// The search's own account: its best, the candidates it looked at, tried
  /// now and read back from the cache, whether it finished.
  BasicTuneResult<Schedule> result;
  /// The fastest Ok candidate recorded under the key, by this run or an
  /// earlier one: what kernels made for the shape's bucket use.
  std::optional<cache::Candidate> winner;
  /// Every candidate this run looked at, in order.
  std::vector<TuneVisit> visited;
  /// The space's candidates, and those of them pruned before any was tried
  /// (SpaceCandidate::pruned).
  size_t candidates = 0, pruned = 0;
  /// The search's time.
  double seconds = 0;
  /// Whether a later process finds the results; else why not.
  bool saved = false;
  std::string notSavedReason;
  /// The cache file; "" for an in-memory cache.
  std::string cachePath;
  /// A candidate's fault broke the GPU context (recorded as its launch
  /// error): every later launch in this process would fail, so the tune
  /// stopped; a new process resumes it.
  bool contextLost = false;
  /// Why the tune failed although it ran (the context was lost, or no
  /// candidate compiled, matched the reference and ran); "" when it did
  /// not. What was recorded stays recorded.
  std::string error;
};

} // namespace lina

#endif // LINA_AUTOTUNE_TUNEREQUEST_H
