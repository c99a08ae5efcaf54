//===- BackwardTuneSession.cpp - A backward's tune, for any caller -----===//
//
// Part of lina. The backward's steps of TuneSessionCore.h.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/BackwardTuneSession.h"

#include "TuneSessionCore.h"
#include "lina/Autotune/BackwardTrial.h"
#include "lina/Reference/Backward.h"

namespace lina {

template <> struct TuneSessionOps<BackwardTune> {
  using Inputs = BackwardTimingInputs;
  using Trials = BackwardGpuTrials;

  static constexpr const char *kNoViable =
      "no viable backward schedule: every one was pruned";
  static constexpr const char *kNoWinner =
      "no candidate compiled, matched the float64 backward and ran";

  /// Each backward takes seconds of NVRTC: say so before every batch, a
  /// fast tune's too.
  static bool announcesBuild(TuneMode) { return true; }

  static constexpr auto enumerate = &enumerateBackwardCandidates;
  static constexpr auto knobs = &backwardScheduleKnobs;
  static constexpr auto key = &makeBackwardTuningKey;
  static constexpr auto same = &sameBackwardSchedule;
  static constexpr auto problem = &backwardScheduleProblem;
  static constexpr auto full = &tuneBackwardFull;
  static constexpr auto fast = &tuneBackwardFast;
  static constexpr auto modelMilliseconds = &simulatedBackwardMilliseconds;

  /// What backward kernels use when nothing is tuned, whatever the shape.
  static BackwardScheduleOptions start(const Spec &spec, const TuneRequest &,
                                       const DeviceLimits &,
                                       const TuneTarget &) {
    return defaultBackwardSchedule(spec);
  }

  /// The forward's inputs and random output gradients, both repeated to
  /// the tuned length.
  static Expected<BackwardTimingInputs>
  uploadInputs(const Spec &spec, const Spec &separate,
               reference::Problem &problem, std::mt19937_64 &rng,
               int64_t smallLen, const TuneRequest &request) {
    reference::HostInputs small = reference::encodeProblem(problem);
    reference::OutputGradients d =
        reference::randomOutputGradients(problem, false, rng);
    // dO has v's layout ([B, T, HV, V] in the dtype), so it is repeated
    // along T as v is.
    reference::HostInputs dO;
    dO.v = reference::encodeInPlace(d.dO, spec.dtype);
    reference::HostInputs host = repeatTokens(separate, small, request.batch,
                                              smallLen, request.seqLen);
    std::vector<uint8_t> dOBytes =
        repeatTokens(separate, dO, request.batch, smallLen, request.seqLen).v;
    return BackwardTimingInputs::upload(spec, request.batch, request.seqLen,
                                        host, dOBytes, request.device,
                                        kTimingFlushBytes);
  }
};

template class BasicTuneSession<BackwardTune>;

Expected<BackwardTuneOutcome> tuneBackwardKernel(const Spec &spec,
                                                 const TuneRequest &request) {
  return openAndRun<BackwardTune>(spec, request);
}

} // namespace lina
