//===- TuneSession.h - A chunk kernel's tune, for any caller ----*- C++ -*-===//
//
// Part of lina. The forward's chunk kernel through BasicTuneSession.h: its
// space is SearchSpace.h's, its trials TuneTrial.h's (on the GPU) or the
// cost model's (CostModel.h, with `simulate`), its start the loader's
// default, and its winner is recorded under the forward's key and the
// spec's family's (TunedLookup.h), where kernels made for shapes of the
// same bucket find it (KernelLoader.h).
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_TUNESESSION_H
#define LINA_AUTOTUNE_TUNESESSION_H

#include "lina/Autotune/BasicTuneSession.h"
#include "lina/Autotune/ScheduleKnobs.h"
#include "lina/Autotune/SearchSpace.h"
#include "lina/Autotune/TuneRequest.h"

namespace lina {

/// The forward's chunk kernel, as a session tunes it.
struct ForwardTune {
  using Schedule = ScheduleOptions;
  using Candidate = SpaceCandidate;
  using Knob = ScheduleKnob;
};

extern template class BasicTuneSession<ForwardTune>;

using TuneSession = BasicTuneSession<ForwardTune>;
/// A forward tune's outcome (a backward's: BackwardTuneSession.h).
using TuneOutcome = BasicTuneOutcome<ScheduleOptions>;

/// TuneSession::open(spec, request), then run().
Expected<TuneOutcome> tuneChunkKernel(const Spec &spec,
                                      const TuneRequest &request);

} // namespace lina

#endif // LINA_AUTOTUNE_TUNESESSION_H
