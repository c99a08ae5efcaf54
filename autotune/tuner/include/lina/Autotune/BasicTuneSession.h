//===- BasicTuneSession.h - A tune, step by step, for any kernel -*- C++ -*-===//
//
// Part of lina. What tuning a spec at a shape takes, whoever asks (`lina
// tune`, the C and C++ APIs' lina_tune, Python's lina.tune) and whichever
// kernel is tuned: the GPU's limits, the viable candidates of the kernel's
// search space, a trial for each (on the GPU: compile, check against the
// float64 reference, time with CUDA events; with `simulate`: the cost
// model), the search over the cache (Tuner.h), and the winner recorded for
// the spec's family too, where kernels made for shapes of the same bucket
// find it.
//
// Written once for every kernel kind, as the searches are (Search.h): a
// kind names its schedule, space candidate and knob types; what differs in
// the doing (its space, its default, its key, its trials) is the kind's
// TuneSessionOps, in the library (TuneSessionCore.h). TuneSession.h is the
// forward's chunk kernel, BackwardTuneSession.h the backward's kernels.
//
// Nothing is printed: the caller hears of each candidate through callbacks
// and gets an outcome. A failure is a Status, never an exception.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_BASICTUNESESSION_H
#define LINA_AUTOTUNE_BASICTUNESESSION_H

#include "lina/Autotune/DeviceLimits.h"
#include "lina/Autotune/TuneRequest.h"
#include "lina/Autotune/TuneStore.h"
#include "lina/Autotune/TunedLookup.h"
#include "lina/Runtime/Device.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace lina {

/// A tune, step by step: open() finds what the tune will look at, which a
/// caller may show before run() takes its time. `Kind` names the kernel's
/// `Schedule`, its space's `Candidate` and its `Knob` (TuneSession.h's
/// ForwardTune, BackwardTuneSession.h's BackwardTune).
template <typename Kind> class BasicTuneSession {
public:
  using Schedule = typename Kind::Schedule;
  using Candidate = typename Kind::Candidate;
  using Knob = typename Kind::Knob;
  using Outcome = BasicTuneOutcome<Schedule>;

  /// Checks the request and the spec, finds the GPU (its limits; an H200's
  /// with `simulate` or `dryRun` when there is none), enumerates the space,
  /// picks the start and makes the tuning key. Tries and records nothing
  /// and opens no cache. Errors: InvalidArgument (a count out of range, an
  /// invalid spec), and without `simulate` or `dryRun` the device's (e.g.
  /// NoDriver).
  static Expected<BasicTuneSession> open(const Spec &spec,
                                         const TuneRequest &request);

  BasicTuneSession(BasicTuneSession &&) noexcept;
  BasicTuneSession &operator=(BasicTuneSession &&) noexcept;
  ~BasicTuneSession();

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
  const std::vector<Candidate> &space() const;
  const std::vector<Schedule> &viable() const;
  /// What kernels of the shape use when nothing is tuned, and where fast
  /// mode starts.
  const Schedule &start() const;
  const std::vector<Knob> &knobs() const;
  const cache::TuningKey &key() const;

  /// Where the tune records, opened on first use.
  const TuneStore &store();
  cache::Cache &cache() { return *store().db; }

  /// Runs the search, recording every candidate as it is looked at, then
  /// records the winner for the spec's family. Errors (nothing recorded):
  /// InvalidArgument for a dry run or a space with no viable candidate,
  /// NoCompiler when NVRTC is missing (else every candidate would be
  /// recorded as a compile error, and never tried again).
  Expected<Outcome> run();

private:
  /// Defined in the library (TuneSessionCore.h), for each kind.
  struct State;
  explicit BasicTuneSession(std::unique_ptr<State> state);
  std::unique_ptr<State> s;
};

} // namespace lina

#endif // LINA_AUTOTUNE_BASICTUNESESSION_H
