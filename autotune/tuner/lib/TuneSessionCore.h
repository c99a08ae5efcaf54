//===- TuneSessionCore.h - BasicTuneSession, written once -------*- C++ -*-===//
//
// Part of lina. The body of BasicTuneSession.h for every kernel kind: the
// request's checks, the GPU and its limits, the space and its viable
// candidates, the run loop with its GPU trials or the cost model, and what
// the outcome says. The forward's and the backward's tunes were one copy of
// each other but for the steps that name the kernel; those are the kind's
// TuneSessionOps, specialized in its .cpp (TuneSession.cpp,
// BackwardTuneSession.cpp) before that file instantiates the session, so a
// fix to the loop reaches both.
//
// A kind's TuneSessionOps holds:
//   Inputs, Trials      the GPU timing inputs and trials (TuneTrial.h,
//                       BackwardTrial.h); Trials is made from (spec,
//                       limits, BuildTarget, cache, TrialSettings, a
//                       function giving the Inputs) and has prepare(),
//                       trial() and contextLost()
//   kNoViable           run()'s refusal when every schedule was pruned
//   kNoWinner           the outcome's error when nothing ran
//   announcesBuild(m)   whether `note` tells of each batch compiled
//   enumerate, start, knobs, key, same, problem, full, fast
//                       the kind's space, default, knobs, tuning key,
//                       schedule equality, stored-row check and searches
//   modelMilliseconds   the cost model's time for a candidate (`simulate`)
//   uploadInputs        the timing inputs, from the random problem at the
//                       tuned shape
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_LIB_TUNESESSIONCORE_H
#define LINA_AUTOTUNE_LIB_TUNESESSIONCORE_H

#include "lina/Autotune/BasicTuneSession.h"
#include "lina/Autotune/KernelBuild.h"
#include "lina/Autotune/KernelLoader.h"
#include "lina/Autotune/TuneTiming.h"
#include "lina/Autotune/TuneTrial.h"
#include "lina/Reference/Reference.h"
#include "lina/Runtime/Nvrtc.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

namespace lina {

/// The steps of a tune that name the kernel; specialized for each kind.
template <typename Kind> struct TuneSessionOps;

namespace tunesession {

inline Status invalid(std::string message) {
  return Status::error(StatusCode::InvalidArgument, std::move(message));
}

/// Why `request` cannot be tuned, whatever the kernel; ok when it can.
Status checkRequest(const TuneRequest &request);

/// What a lost GPU context leaves as the outcome's error.
inline constexpr const char *kContextLost =
    "a candidate's fault broke the GPU context (it is recorded as a launch "
    "error); tune again in a new process to resume";

} // namespace tunesession

template <typename Kind> struct BasicTuneSession<Kind>::State {
  using Ops = TuneSessionOps<Kind>;

  Spec spec;
  TuneRequest request;
  DeviceLimits limits;
  std::optional<cuda::Device> device;
  TuneTarget target;
  std::vector<Candidate> space;
  std::vector<Schedule> viable;
  /// The planned shared memory and threads of each viable candidate, for
  /// the cost model.
  std::vector<int64_t> sharedOf, threadsOf;
  Schedule start;
  std::vector<Knob> knobs;
  cache::TuningKey key;
  std::optional<TuneStore> store;
  std::unique_ptr<typename Ops::Inputs> inputs;
  std::unique_ptr<typename Ops::Trials> trials;

  bool onDevice() const { return device && !request.simulate; }

  /// One random problem at the tuned shape, uploaded once for every
  /// candidate (the layouts depend on the spec only) when the first
  /// candidate needs it: a tune that finds everything recorded makes none.
  Expected<const typename Ops::Inputs *> timingInputs() {
    if (!inputs) {
      std::mt19937_64 rng(11);
      int64_t smallLen =
          std::min<int64_t>(request.seqLen, kTimingDistinctTokens);
      // Made as separate sequences; a varlen spec's are packed at the
      // upload.
      Spec separate = spec;
      separate.varlen = false;
      reference::Problem problem =
          reference::randomProblem(separate, request.batch, smallLen, rng);
      Expected<typename Ops::Inputs> uploaded =
          Ops::uploadInputs(spec, separate, problem, rng, smallLen, request);
      if (!uploaded.ok())
        return uploaded.status();
      inputs = std::make_unique<typename Ops::Inputs>(std::move(*uploaded));
    }
    return inputs.get();
  }

  /// The cost model's time for a viable candidate.
  cache::Candidate simulated(const Schedule &schedule) const {
    cache::Candidate c;
    for (size_t i = 0; i < viable.size(); ++i)
      if (Ops::same(viable[i], schedule)) {
        c.timeMs = Ops::modelMilliseconds(spec, schedule, request.batch,
                                          request.seqLen, limits, sharedOf[i],
                                          threadsOf[i]);
        return c;
      }
    c.status = cache::CandidateStatus::LaunchError;
    c.error = "not a viable candidate of the space";
    return c;
  }

  /// The search's configuration: each look reported to `out` and the
  /// caller, and the trials on the GPU or the cost model.
  BasicTuneConfig<Schedule> config(Outcome &out) {
    const TuneRequest &r = request;
    BasicTuneConfig<Schedule> config;
    config.progress = [&out, &r](const TuneEvent &e) {
      out.visited.push_back({*e.candidate, e.recorded});
      if (r.progress)
        r.progress(e);
    };
    config.maxNewTrials = r.maxNewTrials;
    if (!onDevice()) {
      config.trial = [this](const Schedule &o) { return simulated(o); };
      return config;
    }
    TrialSettings settings;
    settings.repeats = r.repeats;
    settings.warmup = r.warmup;
    settings.jobs =
        r.jobs ? r.jobs : std::max(1u, std::thread::hardware_concurrency());
    settings.device = r.device;
    // Cubins go to the process's cache (none with LINA_CACHE=off), so that
    // the winner later loads warm, unless the caller chose a cache.
    trials = std::make_unique<typename Ops::Trials>(
        spec, limits, BuildTarget{device->arch, target.nvrtc},
        r.cache ? r.cache : processCache(), settings,
        [this] { return timingInputs(); });
    config.trial = [this](const Schedule &o) { return trials->trial(o); };
    config.stop = [this] { return trials->contextLost(); };
    config.prepare = [this, &r, jobs = settings.jobs](
                         const std::vector<Schedule> &batch) {
      if (Ops::announcesBuild(r.mode) && r.note)
        r.note("building " + std::to_string(batch.size()) + " candidates (" +
               std::to_string(jobs) + " compiles at a time)...");
      trials->prepare(batch);
    };
    return config;
  }
};

template <typename Kind>
BasicTuneSession<Kind>::BasicTuneSession(std::unique_ptr<State> state)
    : s(std::move(state)) {}
template <typename Kind>
BasicTuneSession<Kind>::BasicTuneSession(BasicTuneSession &&) noexcept =
    default;
template <typename Kind>
BasicTuneSession<Kind> &
BasicTuneSession<Kind>::operator=(BasicTuneSession &&) noexcept = default;
template <typename Kind> BasicTuneSession<Kind>::~BasicTuneSession() = default;

template <typename Kind>
Expected<BasicTuneSession<Kind>>
BasicTuneSession<Kind>::open(const Spec &spec, const TuneRequest &request) {
  using Ops = TuneSessionOps<Kind>;
  Status checked = tunesession::checkRequest(request);
  if (!checked.ok())
    return checked;
  Spec tuned = spec;
  tuned.varlen = spec.varlen || request.varlen;
  std::vector<std::string> errors = validate(tuned);
  if (!errors.empty())
    return tunesession::invalid("invalid spec: " + errors.front());

  auto st = std::make_unique<State>();
  st->spec = tuned;
  st->request = request;
  Expected<cuda::Device> device = cuda::queryDevice(request.device);
  if (device.ok()) {
    st->device = *device;
    st->limits = deviceLimits(*device);
  } else if (!request.dryRun && !request.simulate) {
    return device.status();
  }
  st->space = Ops::enumerate(st->spec, st->limits);
  for (const Candidate &c : st->space)
    if (c.viable()) {
      st->viable.push_back(c.schedule);
      st->sharedOf.push_back(c.sharedBytes);
      st->threadsOf.push_back(c.threads);
    }
  st->target = tuneTarget(st->onDevice() ? &*st->device : nullptr,
                          request.simulate, st->limits.smCount);
  st->start = Ops::start(st->spec, request, st->limits, st->target);
  st->knobs = Ops::knobs(st->spec);
  st->key = Ops::key(st->spec, st->target.gpu, st->target.nvrtc,
                     request.batch, request.seqLen);
  return BasicTuneSession(std::move(st));
}

template <typename Kind> const Spec &BasicTuneSession<Kind>::spec() const {
  return s->spec;
}
template <typename Kind>
const TuneRequest &BasicTuneSession<Kind>::request() const {
  return s->request;
}
template <typename Kind>
const DeviceLimits &BasicTuneSession<Kind>::limits() const {
  return s->limits;
}
template <typename Kind>
const std::optional<cuda::Device> &BasicTuneSession<Kind>::device() const {
  return s->device;
}
template <typename Kind> bool BasicTuneSession<Kind>::onDevice() const {
  return s->onDevice();
}
template <typename Kind>
const GpuIdentity &BasicTuneSession<Kind>::gpu() const {
  return s->target.gpu;
}
template <typename Kind>
const std::string &BasicTuneSession<Kind>::nvrtcVersion() const {
  return s->target.nvrtc;
}
template <typename Kind>
const std::vector<typename Kind::Candidate> &
BasicTuneSession<Kind>::space() const {
  return s->space;
}
template <typename Kind>
const std::vector<typename Kind::Schedule> &
BasicTuneSession<Kind>::viable() const {
  return s->viable;
}
template <typename Kind>
const typename Kind::Schedule &BasicTuneSession<Kind>::start() const {
  return s->start;
}
template <typename Kind>
const std::vector<typename Kind::Knob> &BasicTuneSession<Kind>::knobs() const {
  return s->knobs;
}
template <typename Kind>
const cache::TuningKey &BasicTuneSession<Kind>::key() const {
  return s->key;
}

template <typename Kind> const TuneStore &BasicTuneSession<Kind>::store() {
  if (!s->store)
    s->store = TuneStore::open(s->request.cache);
  return *s->store;
}

template <typename Kind>
Expected<BasicTuneOutcome<typename Kind::Schedule>>
BasicTuneSession<Kind>::run() {
  using Ops = TuneSessionOps<Kind>;
  State &st = *s;
  const TuneRequest &r = st.request;
  if (r.dryRun)
    return tunesession::invalid("a dry run tries nothing: open the session "
                            "without dryRun to tune");
  if (st.viable.empty())
    return tunesession::invalid(
        Ops::kNoViable +
        (st.space.empty() ? std::string()
                          : " (" + describe(st.space.front().schedule) +
                                ": " + st.space.front().pruned + ")"));
  if (st.onDevice() && !cuda::Nvrtc::get().available())
    return cuda::Nvrtc::get().status();

  cache::Cache &db = cache();
  Outcome out;
  BasicTuneConfig<Schedule> config = st.config(out);
  auto begin = std::chrono::steady_clock::now();
  out.result = r.mode == TuneMode::Full
                   ? Ops::full(db, st.key, st.viable, config)
                   : Ops::fast(db, st.key, st.knobs, st.viable, st.start,
                               r.budget, config);
  out.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
          .count();
  // An earlier run may have recorded something faster than this one saw;
  // the runtime takes the fastest recorded.
  out.winner = db.best(st.key, Ops::problem);
  // Also the family's result (tuningFamily): calls whose spec differs only
  // in flags (a Python call's l2norm in the kernel, its state flags) find
  // it when they have no tune of their own.
  if (out.winner)
    db.recordCandidate(Ops::key(tuningFamily(st.spec), st.target.gpu,
                                st.target.nvrtc, r.batch, r.seqLen),
                       *out.winner);
  out.candidates = st.space.size();
  out.pruned = st.space.size() - st.viable.size();
  out.cachePath = st.store->memory ? "" : db.path();
  out.notSavedReason = st.store->notSavedReason();
  out.saved = out.notSavedReason.empty();
  out.contextLost = st.trials && st.trials->contextLost();
  if (out.contextLost)
    out.error = tunesession::kContextLost;
  else if (!out.result.best)
    out.error = Ops::kNoWinner;
  return out;
}

/// BasicTuneSession<Kind>::open(spec, request), then run().
template <typename Kind>
Expected<BasicTuneOutcome<typename Kind::Schedule>>
openAndRun(const Spec &spec, const TuneRequest &request) {
  Expected<BasicTuneSession<Kind>> session =
      BasicTuneSession<Kind>::open(spec, request);
  if (!session.ok())
    return session.status();
  return session->run();
}

} // namespace lina

#endif // LINA_AUTOTUNE_LIB_TUNESESSIONCORE_H
