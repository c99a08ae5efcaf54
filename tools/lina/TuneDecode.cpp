//===- TuneDecode.cpp - lina tune --decode -----------------------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "TuneDecode.h"
#include "TuneProgress.h"
#include "TuneSaved.h"

#include "lina/Autotune/DecodeLoader.h"
#include "lina/Autotune/DecodeTuning.h"
#include "lina/Autotune/TuneStore.h"
#include "lina/Codegen/DecodePlanner.h"
#include "lina/Reference/DecodeReference.h"
#include "lina/Reference/DeviceCheck.h"
#include "lina/Runtime/Device.h"
#include "lina/Runtime/Event.h"
#include "lina/Runtime/Memory.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <numeric>
#include <random>

namespace lina::cli {

namespace {

/// The reference check runs at no more than this many sequences: a schedule
/// computes every (sequence, head) alike, and the float64 pool of a large
/// batch would take gigabytes of host memory.
constexpr int64_t kCheckBatch = 4;
/// The stand-in GPU's SMs for --simulate (an H200's).
constexpr int64_t kSimulatedSmCount = 132;

/// Device buffers of one pool-form decode call: the inputs, the state pool
/// (a slot per sequence) and the output.
class DecodeCall {
public:
  static Expected<DecodeCall> upload(const Spec &spec,
                                     const reference::Problem &step,
                                     const reference::HostInputs &host,
                                     const std::vector<float> &pool,
                                     int device) {
    DecodeCall call;
    Status failed;
    auto put = [&](const void *data, size_t bytes) -> const void * {
      if (bytes == 0 || !failed.ok())
        return nullptr;
      Expected<cuda::DeviceBuffer> b =
          cuda::DeviceBuffer::allocate(device, bytes);
      if (!b.ok()) {
        failed = b.status();
        return nullptr;
      }
      if (data) {
        Status copied = b->copyFromHost(data, bytes);
        if (!copied.ok())
          failed = copied;
      }
      call.buffers.push_back(std::move(*b));
      return reinterpret_cast<const void *>(
          static_cast<uintptr_t>(call.buffers.back().pointer()));
    };
    auto floats = [&](const std::vector<float> &v) {
      return static_cast<const float *>(put(v.data(), v.size() * 4));
    };
    DecodeArgs &a = call.args;
    a.q = put(host.q.data(), host.q.size());
    a.k = put(host.k.data(), host.k.size());
    a.v = put(host.v.data(), host.v.size());
    a.a = put(host.a.data(), host.a.size());
    a.b = put(host.b.data(), host.b.size());
    a.g = floats(host.g);
    a.beta = floats(host.beta);
    a.gateALog = floats(host.gateALog);
    a.gateDtBias = floats(host.gateDtBias);
    call.outputBytes =
        size_t(step.batch * step.seqLen * spec.valueHeads * spec.valueDim) *
        reference::elementBytes(spec.dtype);
    a.o = const_cast<void *>(put(nullptr, call.outputBytes));
    call.outputIndex = call.buffers.size() - 1;
    call.poolIndex = call.buffers.size();
    a.state = const_cast<float *>(floats(pool));
    std::vector<int32_t> slots(step.batch);
    std::iota(slots.begin(), slots.end(), 0);
    a.stateIndices =
        static_cast<const int32_t *>(put(slots.data(), slots.size() * 4));
    if (!failed.ok())
      return failed;
    a.numSlots = step.batch;
    a.batch = step.batch;
    a.seqLen = step.seqLen;
    return call;
  }

  Status resetPool(const std::vector<float> &pool) {
    return buffers[poolIndex].copyFromHost(pool.data(), pool.size() * 4);
  }
  Expected<std::vector<double>> output(DType dtype) const {
    std::vector<uint8_t> bytes(outputBytes);
    LINA_RETURN_IF_ERROR(
        buffers[outputIndex].copyToHost(bytes.data(), bytes.size()));
    return reference::decode(
        bytes.data(), outputBytes / reference::elementBytes(dtype), dtype);
  }
  Expected<std::vector<double>> pool(size_t floats) const {
    std::vector<float> host(floats);
    LINA_RETURN_IF_ERROR(
        buffers[poolIndex].copyToHost(host.data(), floats * 4));
    return std::vector<double>(host.begin(), host.end());
  }

  DecodeArgs args;

private:
  std::vector<cuda::DeviceBuffer> buffers;
  size_t outputIndex = 0, poolIndex = 0, outputBytes = 0;
};

std::vector<float> randomPool(size_t floats, std::mt19937_64 &rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> pool(floats);
  for (float &x : pool)
    x = normal(rng);
  return pool;
}

/// A small problem with its float64 answer: every candidate must match it.
struct Check {
  reference::Problem step;
  reference::HostInputs host;
  std::vector<float> pool;
  reference::DecodeResult expected;
};

Check makeCheck(const Spec &spec, int64_t batch, int64_t tokens) {
  std::mt19937_64 rng(20261129);
  Check c;
  c.step = reference::randomProblem(spec, batch, tokens, rng);
  c.host = reference::encodeProblem(c.step);
  c.pool = randomPool(
      size_t(batch * spec.valueHeads * spec.keyDim * spec.valueDim), rng);
  reference::DecodeProblem p;
  p.step = c.step;
  p.pool.assign(c.pool.begin(), c.pool.end());
  p.numSlots = batch;
  p.slots.resize(batch);
  std::iota(p.slots.begin(), p.slots.end(), 0);
  c.expected = reference::runDecodeReference(p);
  return c;
}

/// Checks `kernel` against `check`, then times it on `timed`: the median of
/// `repeat` calls after `warmup`, CUDA events.
cache::Candidate trial(const DecodeKernel &kernel, const Spec &spec,
                       const Check &check, DecodeCall &small, DecodeCall &timed,
                       int repeat, int warmup) {
  cache::Candidate c;
  auto fail = [&](cache::CandidateStatus status, const std::string &why) {
    c.status = status;
    c.error = why;
    return c;
  };
  if (Status s = small.resetPool(check.pool); !s.ok())
    return fail(cache::CandidateStatus::LaunchError, s.message());
  if (Status s = kernel.forward(small.args); !s.ok())
    return fail(cache::CandidateStatus::LaunchError, s.message());
  Expected<std::vector<double>> o = small.output(spec.dtype);
  Expected<std::vector<double>> pool = small.pool(check.pool.size());
  if (!o.ok() || !pool.ok())
    return fail(cache::CandidateStatus::LaunchError,
                (o.ok() ? pool.status() : o.status()).message());
  double outputError = reference::relativeError(*o, check.expected.o);
  double stateError = reference::relativeError(*pool, check.expected.pool);
  double tolerance = reference::tolerance(spec.dtype);
  if (!(outputError <= tolerance && stateError <= tolerance)) {
    char why[160];
    std::snprintf(why, sizeof why,
                  "differs from the float64 reference: output %.3g, state "
                  "%.3g (tolerance %.3g)",
                  outputError, stateError, tolerance);
    return fail(cache::CandidateStatus::Mismatch, why);
  }
  Expected<cuda::Event> start = cuda::Event::create(0);
  Expected<cuda::Event> end = cuda::Event::create(0);
  if (!start.ok() || !end.ok())
    return fail(cache::CandidateStatus::LaunchError,
                (start.ok() ? end.status() : start.status()).message());
  std::vector<double> ms;
  for (int i = 0; i < warmup + repeat; ++i) {
    Status s = start->record(timed.args.stream);
    if (s.ok())
      s = kernel.forward(timed.args);
    if (s.ok())
      s = end->record(timed.args.stream);
    Expected<float> elapsed =
        s.ok() ? cuda::Event::elapsedMilliseconds(*start, *end)
               : Expected<float>(s);
    if (!elapsed.ok())
      return fail(cache::CandidateStatus::LaunchError, elapsed.message());
    if (i >= warmup)
      ms.push_back(*elapsed);
  }
  std::sort(ms.begin(), ms.end());
  c.timeMs = ms[ms.size() / 2];
  return c;
}

std::string microseconds(const cache::Candidate &c) {
  if (c.status != cache::CandidateStatus::Ok || !c.timeMs)
    return cache::toString(c.status);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f us", *c.timeMs * 1e3);
  return buf;
}

} // namespace

int tuneDecode(const ArgParser &p, const Spec &input,
               const ProblemShape &shape) {
  if (shape.seqLen < 1 || shape.seqLen > kMaxDecodeTokens)
    throw UsageError("--decode: T in --shape is the tokens per call, 1 to " +
                     std::to_string(kMaxDecodeTokens) + "; got " +
                     std::to_string(shape.seqLen));
  if (input.varlen)
    throw UsageError("--decode: a decode call takes a batch of sequences, "
                     "not a packed varlen batch; drop varlen from the spec");
  Spec spec = input;
  spec.initialState = spec.finalState = false;
  // The planner specializes the spec (e.g. a dplr tied to k decodes as the
  // delta rule); the key is made from what the kernels run, as the loader's.
  Expected<DecodePlan> open = planDecodeKernel(spec);
  if (!open.ok())
    throw std::runtime_error(open.message());
  spec = open->spec;
  std::vector<DecodeSchedule> space = decodeScheduleSpace(spec);
  DecodeSchedule fallback =
      defaultDecodeSchedule(spec, shape.batch, open->warpColumns);
  bool dryRun = p.has("dry-run"), simulate = p.has("simulate");
  Expected<cuda::Device> device = cuda::queryDevice(0);
  if (!device.ok() && !dryRun && !simulate)
    throw std::runtime_error(device.message() +
                             " ('lina tune --decode --dry-run' lists the "
                             "candidates without a GPU)");
  std::printf("%s decode at B=%lld T=%lld H=%lld HV=%lld: %zu candidates "
              "(warp columns x warps); the default here is %s\n",
              input.name.c_str(), (long long)shape.batch,
              (long long)shape.seqLen, (long long)spec.heads,
              (long long)spec.valueHeads, space.size(),
              describe(fallback).c_str());
  if (dryRun) {
    for (const DecodeSchedule &s : space)
      std::printf("  %s\n", describe(s).c_str());
    return 0;
  }

  TuneStore store = TuneStore::open();
  cache::Cache *db = store.db;
  TuneTarget target =
      tuneTarget(simulate ? nullptr : &*device, simulate, kSimulatedSmCount);
  const GpuIdentity &gpu = target.gpu;
  const std::string &nvrtc = target.nvrtc;
  cache::TuningKey key =
      makeDecodeTuningKey(spec, gpu, nvrtc, shape.batch, shape.seqLen);
  std::printf("tuning key %s (bucket %s)\n", key.digest().substr(0, 16).c_str(),
              key.shapeBucket.c_str());

  TuneProgress progress(space.size(), 8, p.has("quiet"));
  std::unique_ptr<Check> check;
  std::unique_ptr<DecodeCall> small, timed;
  if (!simulate) {
    progress.note("computing the float64 reference...");
    check = std::make_unique<Check>(
        makeCheck(spec, std::min(shape.batch, kCheckBatch), shape.seqLen));
    Expected<DecodeCall> s =
        DecodeCall::upload(spec, check->step, check->host, check->pool, 0);
    // Timing needs valid values, not checked ones: one problem's inputs,
    // a pool of the full batch.
    std::mt19937_64 rng(7);
    reference::Problem big =
        reference::randomProblem(spec, shape.batch, shape.seqLen, rng);
    reference::HostInputs bigHost = reference::encodeProblem(big);
    Expected<DecodeCall> t =
        DecodeCall::upload(spec, big, bigHost,
                           randomPool(size_t(shape.batch * spec.valueHeads *
                                             spec.keyDim * spec.valueDim),
                                      rng),
                           0);
    if (!s.ok() || !t.ok())
      throw std::runtime_error((s.ok() ? t.status() : s.status()).message());
    small = std::make_unique<DecodeCall>(std::move(*s));
    timed = std::make_unique<DecodeCall>(std::move(*t));
  }
  int repeat = int(p.getInt("repeat", 1, 100000, 50));
  int warmup = int(p.getInt("warmup", 0, 100000, 10));

  std::vector<cache::Candidate> recorded = db->candidates(key);
  std::optional<cache::Candidate> best;
  size_t index = 0;
  for (const DecodeSchedule &s : space) {
    ++index;
    cache::Schedule stored = toCacheSchedule(s);
    auto earlier = std::find_if(
        recorded.begin(), recorded.end(),
        [&](const cache::Candidate &c) { return c.schedule == stored; });
    cache::Candidate c;
    if (earlier != recorded.end()) {
      c = *earlier;
    } else {
      if (simulate) {
        c.timeMs =
            simulatedDecodeMicroseconds(spec, shape.batch, shape.seqLen, s) /
            1e3;
      } else {
        Expected<DecodePlan> plan = planDecodeKernel(spec, s);
        Expected<DecodeKernel> kernel =
            plan.ok() ? loadDecodeKernel(*plan)
                      : Expected<DecodeKernel>(plan.status());
        if (!kernel.ok()) {
          c.status = kernel.status().code() == StatusCode::CompileError
                         ? cache::CandidateStatus::CompileError
                         : cache::CandidateStatus::LaunchError;
          c.error = kernel.message();
        } else {
          c = trial(*kernel, spec, *check, *small, *timed, repeat, warmup);
        }
      }
      c.schedule = stored;
      db->recordCandidate(key, c);
    }
    bool newBest = c.status == cache::CandidateStatus::Ok && c.timeMs &&
                   (!best || *c.timeMs < *best->timeMs);
    if (newBest)
      best = c;
    bool wasRecorded = earlier != recorded.end();
    std::string note = wasRecorded ? "recorded earlier" : "";
    if (c.status != cache::CandidateStatus::Ok && !c.error.empty())
      note += (note.empty() ? "" : "; ") +
              c.error.substr(0, c.error.find('\n')).substr(0, 60);
    else if (newBest)
      note += (note.empty() ? "" : "; ") + std::string("best so far");
    progress.candidate(index, describe(s), microseconds(c), !wasRecorded,
                       note);
  }

  std::printf("\n%-4s %-8s %-12s %s\n", "rank", "schedule", "time", "note");
  size_t rank = 0;
  std::optional<cache::Candidate> atDefault;
  for (const cache::Candidate &c : db->candidates(key)) {
    std::optional<DecodeSchedule> s = decodeFromCacheSchedule(c.schedule);
    if (!s)
      continue;
    bool isDefault =
        s->warpColumns == fallback.warpColumns && s->warps == fallback.warps;
    if (isDefault)
      atDefault = c;
    bool ok = c.status == cache::CandidateStatus::Ok;
    std::printf("%-4s %-8s %-12s %s%s\n",
                ok ? std::to_string(++rank).c_str() : "-", describe(*s).c_str(),
                microseconds(c).c_str(), isDefault ? "default" : "",
                ok ? "" : (" " + c.error.substr(0, 70)).c_str());
  }
  if (!best)
    throw std::runtime_error("no decode schedule ran and matched the "
                             "reference (the table says why)");
  // Also the family's result, as the chunk tune does: calls whose spec
  // differs only in flags find it when they have no tune of their own.
  if (std::optional<cache::Candidate> winner = db->best(key))
    db->recordCandidate(makeDecodeTuningKey(tuningFamily(spec), gpu, nvrtc,
                                            shape.batch, shape.seqLen),
                        *winner);
  std::printf("best: %s, %s\n",
              describe(*decodeFromCacheSchedule(best->schedule)).c_str(),
              microseconds(*best).c_str());
  if (atDefault && atDefault->timeMs)
    std::printf("default: %s, %s (best is %.2fx faster)\n",
                describe(fallback).c_str(), microseconds(*atDefault).c_str(),
                *atDefault->timeMs / *best->timeMs);
  std::printf("%s\n", recordedWhere(store).c_str());
  return 0;
}

} // namespace lina::cli
