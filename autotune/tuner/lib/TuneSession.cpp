//===- TuneSession.cpp - A chunk kernel's tune, for any caller ---------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/TuneSession.h"

#include "lina/Autotune/CostModel.h"
#include "lina/Autotune/KernelLoader.h"
#include "lina/Autotune/ScheduleKnobs.h"
#include "lina/Autotune/TuneTrial.h"
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

struct TuneSession::State {
  Spec spec;
  TuneRequest request;
  DeviceLimits limits;
  std::optional<cuda::Device> device;
  TuneTarget target;
  std::vector<SpaceCandidate> space;
  std::vector<ScheduleOptions> viable;
  /// The planned shared memory and threads of each viable candidate, for
  /// the cost model.
  std::vector<int64_t> sharedOf, threadsOf;
  ScheduleOptions start;
  std::vector<ScheduleKnob> knobs;
  cache::TuningKey key;
  std::optional<TuneStore> store;
  std::unique_ptr<RotatingInputs> inputs;
  std::unique_ptr<GpuTrials> trials;

  bool onDevice() const { return device && !request.simulate; }

  /// One random problem at the tuned shape, uploaded once for every
  /// candidate (the layouts depend on the spec only) when the first
  /// candidate needs it: a tune that finds everything recorded makes none.
  Expected<const RotatingInputs *> timingInputs() {
    if (!inputs) {
      std::mt19937_64 rng(11);
      int64_t smallLen = std::min<int64_t>(request.seqLen, kTimingDistinctTokens);
      // Made as separate sequences; a varlen spec's are packed at the
      // upload.
      Spec separate = spec;
      separate.varlen = false;
      reference::Problem problem =
          reference::randomProblem(separate, request.batch, smallLen, rng);
      reference::HostInputs host =
          repeatTokens(separate, reference::encodeProblem(problem),
                       request.batch, smallLen, request.seqLen);
      Expected<RotatingInputs> uploaded =
          RotatingInputs::upload(spec, request.batch, request.seqLen, host,
                                 request.device, kTimingFlushBytes);
      if (!uploaded.ok())
        return uploaded.status();
      inputs = std::make_unique<RotatingInputs>(std::move(*uploaded));
    }
    return inputs.get();
  }

  /// The cost model's time for a viable candidate.
  cache::Candidate simulated(const ScheduleOptions &schedule) const {
    cache::Candidate c;
    for (size_t i = 0; i < viable.size(); ++i)
      if (sameSchedule(viable[i], schedule)) {
        c.timeMs =
            modelMilliseconds(spec, schedule, request.batch, request.seqLen,
                              limits, sharedOf[i], threadsOf[i]);
        return c;
      }
    c.status = cache::CandidateStatus::LaunchError;
    c.error = "not a viable candidate of the space";
    return c;
  }
};

TuneSession::TuneSession(std::unique_ptr<State> state) : s(std::move(state)) {}
TuneSession::TuneSession(TuneSession &&) noexcept = default;
TuneSession &TuneSession::operator=(TuneSession &&) noexcept = default;
TuneSession::~TuneSession() = default;

Expected<TuneSession> TuneSession::open(const Spec &spec,
                                        const TuneRequest &request) {
  // A tune times calls of T tokens: with none there is nothing to time, and
  // its results would be recorded for the t=1..256 bucket all the same.
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
  st->space = enumerateCandidates(st->spec, st->limits);
  for (const SpaceCandidate &c : st->space)
    if (c.viable()) {
      st->viable.push_back(c.schedule);
      st->sharedOf.push_back(c.sharedBytes);
      st->threadsOf.push_back(c.threads);
    }
  st->target = tuneTarget(st->onDevice() ? &*st->device : nullptr,
                          request.simulate, st->limits.smCount);
  // What kernels of this shape use when nothing is tuned: the loader's
  // default for the grid.
  st->start = defaultSchedule(st->spec, request.batch, st->limits.smCount,
                              request.seqLen, st->target.gpu.arch);
  st->knobs = scheduleKnobs(st->spec);
  st->key = makeTuningKey(st->spec, st->target.gpu, st->target.nvrtc,
                          request.batch, request.seqLen);
  return TuneSession(std::move(st));
}

const Spec &TuneSession::spec() const { return s->spec; }
const TuneRequest &TuneSession::request() const { return s->request; }
const DeviceLimits &TuneSession::limits() const { return s->limits; }
const std::optional<cuda::Device> &TuneSession::device() const {
  return s->device;
}
bool TuneSession::onDevice() const { return s->onDevice(); }
const GpuIdentity &TuneSession::gpu() const { return s->target.gpu; }
const std::string &TuneSession::nvrtcVersion() const { return s->target.nvrtc; }
const std::vector<SpaceCandidate> &TuneSession::space() const {
  return s->space;
}
const std::vector<ScheduleOptions> &TuneSession::viable() const {
  return s->viable;
}
const ScheduleOptions &TuneSession::start() const { return s->start; }
const std::vector<ScheduleKnob> &TuneSession::knobs() const { return s->knobs; }
const cache::TuningKey &TuneSession::key() const { return s->key; }

const TuneStore &TuneSession::store() {
  if (!s->store)
    s->store = TuneStore::open(s->request.cache);
  return *s->store;
}

Expected<TuneOutcome> TuneSession::run() {
  State &st = *s;
  const TuneRequest &r = st.request;
  if (r.dryRun)
    return invalid("a dry run tries nothing: open the session without "
                   "dryRun to tune");
  if (st.viable.empty())
    return invalid("no viable candidate: every schedule was pruned" +
                   (st.space.empty()
                        ? std::string()
                        : " (" + describe(st.space.front().schedule) + ": " +
                              st.space.front().pruned + ")"));
  if (st.onDevice() && !cuda::Nvrtc::get().available())
    return cuda::Nvrtc::get().status();

  cache::Cache &db = cache();
  TuneOutcome out;
  TuneConfig config;
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
    // Cubins go to the process's cache (none with LINA_CACHE=off), so that
    // the winner later loads warm, unless the caller chose a cache.
    st.trials = std::make_unique<GpuTrials>(
        st.spec, st.limits, BuildTarget{st.device->arch, st.target.nvrtc},
        r.cache ? r.cache : processCache(), settings,
        [&st] { return st.timingInputs(); });
    config.trial = [&st](const ScheduleOptions &o) {
      return st.trials->trial(o);
    };
    config.stop = [&st] { return st.trials->contextLost(); };
    config.prepare = [&st, &r, jobs = settings.jobs](
                         const std::vector<ScheduleOptions> &batch) {
      // A full sweep builds its whole space before the first trial, which
      // takes minutes without a line; fast's batches are a knob's few
      // neighbours.
      if (r.mode == TuneMode::Full && r.note)
        r.note("building " + std::to_string(batch.size()) + " candidates (" +
               std::to_string(jobs) + " compiles at a time)...");
      st.trials->prepare(batch);
    };
  } else {
    config.trial = [&st](const ScheduleOptions &o) { return st.simulated(o); };
  }

  auto begin = std::chrono::steady_clock::now();
  out.result = r.mode == TuneMode::Full
                   ? tuneFull(db, st.key, st.viable, config)
                   : tuneFast(db, st.key, st.knobs, st.viable, st.start,
                              r.budget, config);
  out.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
          .count();
  // An earlier run may have recorded something faster than this one saw;
  // the runtime takes the fastest recorded.
  out.winner = db.best(st.key, storedScheduleProblem);
  // Also the family's result (tuningFamily): calls whose spec differs only
  // in flags find it when they have no tune of their own.
  if (out.winner)
    db.recordCandidate(makeTuningKey(tuningFamily(st.spec), st.target.gpu,
                                     st.target.nvrtc, r.batch, r.seqLen),
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
    out.error = "no candidate compiled, matched the reference and ran";
  return out;
}

Expected<TuneOutcome> tuneChunkKernel(const Spec &spec,
                                      const TuneRequest &request) {
  Expected<TuneSession> session = TuneSession::open(spec, request);
  if (!session.ok())
    return session.status();
  return session->run();
}

} // namespace lina
