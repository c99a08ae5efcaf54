//===- BackwardTuneSession.cpp - A backward's tune, for any caller -----===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/BackwardTuneSession.h"

#include "lina/Autotune/BackwardTrial.h"
#include "lina/Autotune/KernelLoader.h"
#include "lina/Reference/Backward.h"
#include "lina/Reference/Reference.h"
#include "lina/Runtime/Nvrtc.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

namespace lina {

namespace {

Status invalid(std::string message) {
  return Status::error(StatusCode::InvalidArgument, std::move(message));
}

} // namespace

struct BackwardTuneSession::State {
  Spec spec;
  TuneRequest request;
  DeviceLimits limits;
  std::optional<cuda::Device> device;
  TuneTarget target;
  std::vector<BackwardSpaceCandidate> space;
  std::vector<BackwardScheduleOptions> viable;
  std::vector<int64_t> sharedOf, threadsOf;
  BackwardScheduleOptions start;
  std::vector<BackwardKnob> knobs;
  cache::TuningKey key;
  std::optional<TuneStore> store;
  std::unique_ptr<BackwardTimingInputs> inputs;
  std::unique_ptr<BackwardGpuTrials> trials;

  bool onDevice() const { return device && !request.simulate; }

  /// Random inputs and output gradients at the tuned shape, uploaded once
  /// for every candidate when the first one needs them.
  Expected<const BackwardTimingInputs *> timingInputs() {
    if (!inputs) {
      std::mt19937_64 rng(11);
      int64_t smallLen =
          std::min<int64_t>(request.seqLen, kTimingDistinctTokens);
      Spec separate = spec;
      separate.varlen = false;
      reference::Problem problem =
          reference::randomProblem(separate, request.batch, smallLen, rng);
      reference::HostInputs small = reference::encodeProblem(problem);
      reference::OutputGradients d =
          reference::randomOutputGradients(problem, false, rng);
      // dO has v's layout ([B, T, HV, V] in the dtype), so it is repeated
      // along T as v is.
      reference::HostInputs dO;
      dO.v = reference::encodeInPlace(d.dO, spec.dtype);
      reference::HostInputs host = repeatTokens(
          separate, small, request.batch, smallLen, request.seqLen);
      std::vector<uint8_t> dOBytes =
          repeatTokens(separate, dO, request.batch, smallLen, request.seqLen)
              .v;
      Expected<BackwardTimingInputs> uploaded = BackwardTimingInputs::upload(
          spec, request.batch, request.seqLen, host, dOBytes, request.device,
          kTimingFlushBytes);
      if (!uploaded.ok())
        return uploaded.status();
      inputs = std::make_unique<BackwardTimingInputs>(std::move(*uploaded));
    }
    return inputs.get();
  }

  cache::Candidate simulated(const BackwardScheduleOptions &schedule) const {
    cache::Candidate c;
    for (size_t i = 0; i < viable.size(); ++i)
      if (sameBackwardSchedule(viable[i], schedule)) {
        c.timeMs = simulatedBackwardMilliseconds(spec, schedule, request.batch,
                                                 request.seqLen, limits,
                                                 sharedOf[i], threadsOf[i]);
        return c;
      }
    c.status = cache::CandidateStatus::LaunchError;
    c.error = "not a viable candidate of the space";
    return c;
  }
};

BackwardTuneSession::BackwardTuneSession(std::unique_ptr<State> state)
    : s(std::move(state)) {}
BackwardTuneSession::BackwardTuneSession(BackwardTuneSession &&) noexcept =
    default;
BackwardTuneSession &
BackwardTuneSession::operator=(BackwardTuneSession &&) noexcept = default;
BackwardTuneSession::~BackwardTuneSession() = default;

Expected<BackwardTuneSession>
BackwardTuneSession::open(const Spec &spec, const TuneRequest &request) {
  if (request.batch < 1 || request.seqLen < 1)
    return invalid("a tune needs batch and seq_len of at least 1, got " +
                   std::to_string(request.batch) + " and " +
                   std::to_string(request.seqLen));
  if (request.mode == TuneMode::Fast && request.budget < 1)
    return invalid("a fast tune needs a budget of at least 1 candidate");
  if (request.repeats < 1 || request.warmup < 0)
    return invalid("a tune needs at least 1 timed call and no negative "
                   "number of warm-up calls");
  Spec tuned = spec;
  tuned.varlen = spec.varlen || request.varlen;
  std::vector<std::string> errors = validate(tuned);
  if (!errors.empty())
    return invalid("invalid spec: " + errors.front());

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
  st->space = enumerateBackwardCandidates(st->spec, st->limits);
  for (const BackwardSpaceCandidate &c : st->space)
    if (c.viable()) {
      st->viable.push_back(c.schedule);
      st->sharedOf.push_back(c.sharedBytes);
      st->threadsOf.push_back(c.threads);
    }
  st->target = tuneTarget(st->onDevice() ? &*st->device : nullptr,
                          request.simulate, st->limits.smCount);
  st->start = defaultBackwardSchedule(st->spec);
  st->knobs = backwardScheduleKnobs(st->spec);
  st->key = makeBackwardTuningKey(st->spec, st->target.gpu, st->target.nvrtc,
                                  request.batch, request.seqLen);
  return BackwardTuneSession(std::move(st));
}

const Spec &BackwardTuneSession::spec() const { return s->spec; }
const TuneRequest &BackwardTuneSession::request() const { return s->request; }
const DeviceLimits &BackwardTuneSession::limits() const { return s->limits; }
bool BackwardTuneSession::onDevice() const { return s->onDevice(); }
const GpuIdentity &BackwardTuneSession::gpu() const { return s->target.gpu; }
const std::string &BackwardTuneSession::nvrtcVersion() const {
  return s->target.nvrtc;
}
const std::vector<BackwardSpaceCandidate> &BackwardTuneSession::space() const {
  return s->space;
}
const std::vector<BackwardScheduleOptions> &
BackwardTuneSession::viable() const {
  return s->viable;
}
const BackwardScheduleOptions &BackwardTuneSession::start() const {
  return s->start;
}
const std::vector<BackwardKnob> &BackwardTuneSession::knobs() const {
  return s->knobs;
}
const cache::TuningKey &BackwardTuneSession::key() const { return s->key; }

const TuneStore &BackwardTuneSession::store() {
  if (!s->store)
    s->store = TuneStore::open(s->request.cache);
  return *s->store;
}

Expected<BackwardTuneOutcome> BackwardTuneSession::run() {
  State &st = *s;
  const TuneRequest &r = st.request;
  if (r.dryRun)
    return invalid("a dry run tries nothing: open the session without "
                   "dryRun to tune");
  if (st.viable.empty())
    return invalid("no viable backward schedule: every one was pruned" +
                   (st.space.empty()
                        ? std::string()
                        : " (" + describe(st.space.front().schedule) + ": " +
                              st.space.front().pruned + ")"));
  if (st.onDevice() && !cuda::Nvrtc::get().available())
    return cuda::Nvrtc::get().status();

  cache::Cache &db = cache();
  BackwardTuneOutcome out;
  BackwardTuneConfig config;
  config.progress = [&out, &r](const TuneEvent &e) {
    out.visited.push_back({*e.candidate, e.recorded});
    if (r.progress)
      r.progress(e);
  };
  config.maxNewTrials = r.maxNewTrials;
  if (st.onDevice()) {
    TrialSettings settings;
    settings.repeats = r.repeats;
    settings.warmup = r.warmup;
    settings.jobs =
        r.jobs ? r.jobs : std::max(1u, std::thread::hardware_concurrency());
    settings.device = r.device;
    // Cubins go to the process's cache, so that the winner later loads
    // warm, unless the caller chose a cache.
    st.trials = std::make_unique<BackwardGpuTrials>(
        st.spec, st.limits, BuildTarget{st.device->arch, st.target.nvrtc},
        r.cache ? r.cache : processCache(), settings,
        [&st] { return st.timingInputs(); });
    config.trial = [&st](const BackwardScheduleOptions &o) {
      return st.trials->trial(o);
    };
    config.stop = [&st] { return st.trials->contextLost(); };
    config.prepare = [&st, &r, jobs = settings.jobs](
                         const std::vector<BackwardScheduleOptions> &batch) {
      // Each backward takes seconds of NVRTC: say so before a batch.
      if (r.note)
        r.note("building " + std::to_string(batch.size()) +
               " candidates (" + std::to_string(jobs) +
               " compiles at a time)...");
      st.trials->prepare(batch);
    };
  } else {
    config.trial = [&st](const BackwardScheduleOptions &o) {
      return st.simulated(o);
    };
  }

  auto begin = std::chrono::steady_clock::now();
  out.result = r.mode == TuneMode::Full
                   ? tuneBackwardFull(db, st.key, st.viable, config)
                   : tuneBackwardFast(db, st.key, st.knobs, st.viable,
                                      st.start, r.budget, config);
  out.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
          .count();
  out.winner = db.best(st.key, backwardScheduleProblem);
  // Also the family's result: backward calls whose spec differs only in
  // flags (a Python call's l2norm in the kernel, its state flags) find it
  // when they have no tune of their own.
  if (out.winner)
    db.recordCandidate(makeBackwardTuningKey(tuningFamily(st.spec),
                                             st.target.gpu, st.target.nvrtc,
                                             r.batch, r.seqLen),
                       *out.winner);
  out.candidates = st.space.size();
  out.pruned = st.space.size() - st.viable.size();
  out.cachePath = st.store->memory ? "" : db.path();
  out.notSavedReason = st.store->notSavedReason();
  out.saved = out.notSavedReason.empty();
  out.contextLost = st.trials && st.trials->contextLost();
  if (out.contextLost)
    out.error = "a candidate's fault broke the GPU context (it is recorded "
                "as a launch error); tune again in a new process to resume";
  else if (!out.result.best)
    out.error = "no candidate compiled, matched the float64 backward and ran";
  return out;
}

Expected<BackwardTuneOutcome> tuneBackwardKernel(const Spec &spec,
                                                 const TuneRequest &request) {
  Expected<BackwardTuneSession> session =
      BackwardTuneSession::open(spec, request);
  if (!session.ok())
    return session.status();
  return session->run();
}

} // namespace lina
