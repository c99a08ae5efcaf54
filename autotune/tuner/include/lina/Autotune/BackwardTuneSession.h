//===- BackwardTuneSession.h - A backward's tune, for any caller -*- C++ -*-===//
//
// Part of lina. The backward's kernels through BasicTuneSession.h: `lina
// tune --backward`, lina_tune with LINA_TUNE_BACKWARD and lina.tune(...,
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
#include "lina/Autotune/BasicTuneSession.h"
#include "lina/Autotune/TuneRequest.h"

namespace lina {

/// The backward's kernels, as a session tunes them. Their start is
/// defaultBackwardSchedule, what backward kernels use when nothing is
/// tuned.
struct BackwardTune {
  using Schedule = BackwardScheduleOptions;
  using Candidate = BackwardSpaceCandidate;
  using Knob = BackwardKnob;
};

extern template class BasicTuneSession<BackwardTune>;

using BackwardTuneSession = BasicTuneSession<BackwardTune>;
using BackwardTuneOutcome = BasicTuneOutcome<BackwardScheduleOptions>;

/// BackwardTuneSession::open(spec, request), then run().
Expected<BackwardTuneOutcome> tuneBackwardKernel(const Spec &spec,
                                                 const TuneRequest &request);

} // namespace lina

#endif // LINA_AUTOTUNE_BACKWARDTUNESESSION_H
