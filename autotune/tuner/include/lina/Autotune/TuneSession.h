//===- TuneSession.h - A chunk kernel's tune, for any caller ----*- C++ -*-===//
//
// Part of lina. What tuning a spec at a shape takes, whoever asks: `lina
// tune`, the C and C++ APIs (lina_tune) and Python (lina.tune). The GPU's
// limits, the viable candidates of the search space (SearchSpace.h), a trial
// for each (on the GPU: compile, check against the float64 reference, time
// with CUDA events, TuneTrial.h; with `simulate`: the cost model,
// CostModel.h), the search over the cache (Tuner.h), and the winner recorded
// for the spec's family too (TunedLookup.h), where kernels made for shapes
// of the same bucket find it (KernelLoader.h).
//
// Nothing is printed: the caller hears of each candidate through callbacks
// and gets an outcome. A failure is a Status, never an exception.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_TUNESESSION_H
#define LINA_AUTOTUNE_TUNESESSION_H

#include "lina/Autotune/DeviceLimits.h"
#include "lina/Autotune/SearchSpace.h"
#include "lina/Autotune/TuneStore.h"
#include "lina/Autotune/TunedLookup.h"
#include "lina/Autotune/Tuner.h"
#include "lina/Runtime/Device.h"

#include <cstddef>
#include <functional>
#include <memory>
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

/// A forward tune's outcome (a backward's: BackwardTuneSession.h).
using TuneOutcome = BasicTuneOutcome<ScheduleOptions>;

/// A tune, step by step: open() finds what the tune will look at, which a
/// caller may show before run() takes its time.
class TuneSession {
public:
  /// Checks the request and the spec, finds the GPU (its limits; an H200's
  /// with `simulate` or `dryRun` when there is none), enumerates the space,
  /// picks the start and makes the tuning key. Tries and records nothing
  /// and opens no cache. Errors: InvalidArgument (a count out of range, an
  /// invalid spec), and without `simulate` or `dryRun` the device's (e.g.
  /// NoDriver).
  static Expected<TuneSession> open(const Spec &spec,
                                    const TuneRequest &request);

  TuneSession(TuneSession &&) noexcept;
  TuneSession &operator=(TuneSession &&) noexcept;
  ~TuneSession();

  const Spec &spec() const;
  const TuneRequest &request() const;
  const DeviceLimits &limits() const;
  /// The GPU, when one answered (also with `simulate`, whose limits are
  /// then that GPU's).
  const std::optional<cuda::Device> &device() const;
  /// Whether candidates run on the GPU (not simulated).
  bool onDevice() const;
  /// The GPU and NVRTC as the tuning key holds them.
  const GpuIdentity &gpu() const;
  const std::string &nvrtcVersion() const;
  /// Every candidate of the space, viable or pruned with the reason.
  const std::vector<SpaceCandidate> &space() const;
  const std::vector<ScheduleOptions> &viable() const;
  /// What kernels of the shape use when nothing is tuned, and where fast
  /// mode starts.
  const ScheduleOptions &start() const;
  const std::vector<ScheduleKnob> &knobs() const;
  const cache::TuningKey &key() const;

  /// Where the tune records, opened on first use.
  const TuneStore &store();
  cache::Cache &cache() { return *store().db; }

  /// Runs the search, recording every candidate as it is looked at, then
  /// records the winner for the spec's family. Errors (nothing recorded):
  /// InvalidArgument for a dry run or a space with no viable candidate,
  /// NoCompiler when NVRTC is missing (else every candidate would be
  /// recorded as a compile error, and never tried again).
  Expected<TuneOutcome> run();

private:
  struct State;
  explicit TuneSession(std::unique_ptr<State> state);
  std::unique_ptr<State> s;
};

/// TuneSession::open(spec, request), then run().
Expected<TuneOutcome> tuneChunkKernel(const Spec &spec,
                                      const TuneRequest &request);

} // namespace lina

#endif // LINA_AUTOTUNE_TUNESESSION_H
