//===- BackwardTuneSession.h - A backward's tune, for any caller -*- C++ -*-===//
//
// Part of lina. TuneSession.h for the backward's kernels: `lina tune
// --backward`, lina_tune with LINA_TUNE_BACKWARD and lina.tune(...,
// backward=True) make it. The same request (TuneRequest), the same kind of
// outcome; the space is the backward's (BackwardSearchSpace.h), the trials
// time backward calls (BackwardTrial.h) or, with `simulate`, a stand-in
// (simulatedBackwardMilliseconds), and the winner is recorded under the
// backward's key (BackwardTuning.h), for the spec and its family, where
// backward kernels made for a shape of the bucket find it.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_BACKWARDTUNESESSION_H
#define LINA_AUTOTUNE_BACKWARDTUNESESSION_H

#include "lina/Autotune/BackwardSearchSpace.h"
#include "lina/Autotune/BackwardTuning.h"
#include "lina/Autotune/TuneSession.h"

#include <memory>
#include <optional>
#include <vector>

namespace lina {

using BackwardTuneOutcome = BasicTuneOutcome<BackwardScheduleOptions>;

class BackwardTuneSession {
public:
  /// As TuneSession::open: checks the request and the spec, finds the GPU
  /// (an H200's limits with `simulate` or `dryRun` when there is none),
  /// plans the space and makes the key. Tries and records nothing.
  static Expected<BackwardTuneSession> open(const Spec &spec,
                                            const TuneRequest &request);

  BackwardTuneSession(BackwardTuneSession &&) noexcept;
  BackwardTuneSession &operator=(BackwardTuneSession &&) noexcept;
  ~BackwardTuneSession();

  const Spec &spec() const;
  const TuneRequest &request() const;
  const DeviceLimits &limits() const;
  bool onDevice() const;
  const GpuIdentity &gpu() const;
  const std::string &nvrtcVersion() const;
  const std::vector<BackwardSpaceCandidate> &space() const;
  const std::vector<BackwardScheduleOptions> &viable() const;
  /// What backward kernels use when nothing is tuned
  /// (defaultBackwardSchedule), and where fast mode starts.
  const BackwardScheduleOptions &start() const;
  const std::vector<BackwardKnob> &knobs() const;
  const cache::TuningKey &key() const;

  /// Where the tune records, opened on first use.
  const TuneStore &store();
  cache::Cache &cache() { return *store().db; }

  /// As TuneSession::run.
  Expected<BackwardTuneOutcome> run();

private:
  struct State;
  explicit BackwardTuneSession(std::unique_ptr<State> state);
  std::unique_ptr<State> s;
};

/// BackwardTuneSession::open(spec, request), then run().
Expected<BackwardTuneOutcome> tuneBackwardKernel(const Spec &spec,
                                                 const TuneRequest &request);

} // namespace lina

#endif // LINA_AUTOTUNE_BACKWARDTUNESESSION_H
