//===- TuneSession.cpp - A chunk kernel's tune, for any caller ---------===//
//
// Part of lina. The forward's steps of TuneSessionCore.h.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/TuneSession.h"

#include "TuneSessionCore.h"
#include "lina/Autotune/CostModel.h"

namespace lina {

template <> struct TuneSessionOps<ForwardTune> {
  using Inputs = RotatingInputs;
  using Trials = GpuTrials;

  static constexpr const char *kNoViable =
      "no viable candidate: every schedule was pruned";
  static constexpr const char *kNoWinner =
      "no candidate compiled, matched the reference and ran";

  /// A full sweep builds its whole space before the first trial, which
  /// takes minutes without a line; fast's batches are a knob's few
  /// neighbours.
  static bool announcesBuild(TuneMode mode) { return mode == TuneMode::Full; }

  static constexpr auto enumerate = &enumerateCandidates;
  static constexpr auto knobs = &scheduleKnobs;
  static constexpr auto key = &makeTuningKey;
  static constexpr auto same = &sameSchedule;
  static constexpr auto problem = &storedScheduleProblem;
  static constexpr auto full = &tuneFull;
  static constexpr auto fast = &tuneFast;
  static constexpr auto modelMilliseconds = &lina::modelMilliseconds;

  /// What kernels of this shape use when nothing is tuned: the loader's
  /// default for the grid.
  static ScheduleOptions start(const Spec &spec, const TuneRequest &request,
                               const DeviceLimits &limits,
                               const TuneTarget &target) {
    return defaultSchedule(spec, request.batch, limits.smCount,
                           request.seqLen, target.gpu.arch);
  }

  /// The problem's tokens repeated to the tuned length, rotated over
  /// copies.
  static Expected<RotatingInputs>
  uploadInputs(const Spec &spec, const Spec &separate,
               reference::Problem &problem, std::mt19937_64 &,
               int64_t smallLen, const TuneRequest &request) {
    reference::HostInputs host =
        repeatTokens(separate, reference::encodeProblem(problem),
                     request.batch, smallLen, request.seqLen);
    return RotatingInputs::upload(spec, request.batch, request.seqLen, host,
                                  request.device, kTimingFlushBytes);
  }
};

template class BasicTuneSession<ForwardTune>;

Expected<TuneOutcome> tuneChunkKernel(const Spec &spec,
                                      const TuneRequest &request) {
  return openAndRun<ForwardTune>(spec, request);
}

} // namespace lina
