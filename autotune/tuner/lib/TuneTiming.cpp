//===- TuneTiming.cpp - Timing a kernel the way a tune must ------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/TuneTiming.h"

#include "lina/Runtime/Device.h"
#include "lina/Runtime/Event.h"

#include <algorithm>

namespace lina {

Status uploadBuffer(int device, const void *data, size_t bytes,
                    std::vector<cuda::DeviceBuffer> &buffers, void *&pointer) {
  pointer = nullptr;
  if (bytes == 0)
    return Status();
  Expected<cuda::DeviceBuffer> b = cuda::DeviceBuffer::allocate(device, bytes);
  if (!b.ok())
    return b.status();
  if (data)
    LINA_RETURN_IF_ERROR(b->copyFromHost(data, bytes));
  pointer = reinterpret_cast<void *>(b->pointer());
  buffers.push_back(std::move(*b));
  return Status();
}

namespace {

template <typename T>
Status putVector(int device, const std::vector<T> &v,
                 std::vector<cuda::DeviceBuffer> &buffers, const T *&out) {
  void *p = nullptr;
  LINA_RETURN_IF_ERROR(
      uploadBuffer(device, v.data(), v.size() * sizeof(T), buffers, p));
  out = static_cast<const T *>(p);
  return Status();
}

Status putBytes(int device, const std::vector<uint8_t> &v,
                std::vector<cuda::DeviceBuffer> &buffers, const void *&out) {
  void *p = nullptr;
  LINA_RETURN_IF_ERROR(uploadBuffer(device, v.data(), v.size(), buffers, p));
  out = p;
  return Status();
}

/// [batch, smallLen, ...] -> [batch, seqLen, ...], token t copying token
/// t % smallLen of the same sequence.
template <typename T>
std::vector<T> repeat(const std::vector<T> &v, int64_t batch, int64_t smallLen,
                      int64_t seqLen) {
  if (v.empty() || batch * smallLen == 0)
    return v;
  size_t token = v.size() / size_t(batch * smallLen);
  std::vector<T> out(token * size_t(batch * seqLen));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < seqLen; ++t)
      std::copy_n(v.begin() + (b * smallLen + t % smallLen) * token, token,
                  out.begin() + (b * seqLen + t) * token);
  return out;
}

} // namespace

reference::HostInputs repeatTokens(const Spec &spec,
                                   const reference::HostInputs &small,
                                   int64_t batch, int64_t smallLen,
                                   int64_t seqLen) {
  reference::HostInputs r = small; // per-head and per-sequence parts as is
  r.q = repeat(small.q, batch, smallLen, seqLen);
  r.k = repeat(small.k, batch, smallLen, seqLen);
  r.v = repeat(small.v, batch, smallLen, seqLen);
  r.a = repeat(small.a, batch, smallLen, seqLen);
  r.b = repeat(small.b, batch, smallLen, seqLen);
  if (spec.decay != DecayKind::FixedPerHead)
    r.g = repeat(small.g, batch, smallLen, seqLen);
  r.beta = repeat(small.beta, batch, smallLen, seqLen);
  return r;
}

Expected<RotatingInputs> RotatingInputs::upload(const Spec &s, int64_t batch,
                                                int64_t seqLen,
                                                const reference::HostInputs &in,
                                                int device, size_t flushBytes) {
  size_t outBytes = size_t(batch * seqLen * s.valueHeads) * size_t(s.valueDim) *
                    reference::elementBytes(s.dtype);
  size_t stateBytes = size_t(batch * s.valueHeads) *
                      size_t(s.keyDim * s.valueDim) * sizeof(float);
  size_t setBytes = in.q.size() + in.k.size() + in.v.size() + in.a.size() +
                    in.b.size() + 4 * (in.g.size() + in.beta.size()) +
                    (s.initialState ? stateBytes : 0) + outBytes +
                    (s.finalState ? stateBytes : 0);
  size_t copies = std::clamp<size_t>(
      (flushBytes + setBytes - 1) / std::max<size_t>(setBytes, 1), 1, 8);
  std::vector<int64_t> cuSeqlens = in.cuSeqlens;
  if (s.varlen) {
    cuSeqlens.resize(size_t(batch) + 1);
    for (int64_t n = 0; n <= batch; ++n)
      cuSeqlens[n] = n * seqLen;
  }
  RotatingInputs r;
  for (size_t c = 0; c < copies; ++c) {
    ForwardArgs a;
    auto &bufs = r.buffers_;
    LINA_RETURN_IF_ERROR(putBytes(device, in.q, bufs, a.q));
    LINA_RETURN_IF_ERROR(putBytes(device, in.k, bufs, a.k));
    LINA_RETURN_IF_ERROR(putBytes(device, in.v, bufs, a.v));
    LINA_RETURN_IF_ERROR(putBytes(device, in.a, bufs, a.a));
    LINA_RETURN_IF_ERROR(putBytes(device, in.b, bufs, a.b));
    LINA_RETURN_IF_ERROR(putVector(device, in.g, bufs, a.g));
    LINA_RETURN_IF_ERROR(putVector(device, in.beta, bufs, a.beta));
    LINA_RETURN_IF_ERROR(putVector(device, in.gateALog, bufs, a.gateALog));
    LINA_RETURN_IF_ERROR(putVector(device, in.gateDtBias, bufs, a.gateDtBias));
    LINA_RETURN_IF_ERROR(
        putVector(device, in.initialState, bufs, a.initialState));
    LINA_RETURN_IF_ERROR(putVector(device, cuSeqlens, bufs, a.cuSeqlens));
    void *o = nullptr, *state = nullptr;
    LINA_RETURN_IF_ERROR(uploadBuffer(device, nullptr, outBytes, bufs, o));
    if (s.finalState)
      LINA_RETURN_IF_ERROR(
          uploadBuffer(device, nullptr, stateBytes, bufs, state));
    a.o = o;
    a.finalState = static_cast<float *>(state);
    a.batch = s.varlen ? 1 : batch;
    a.seqLen = s.varlen ? batch * seqLen : seqLen;
    a.numSequences = batch;
    r.args_.push_back(a);
  }
  return r;
}

Expected<Timing> timeCalls(const TimedLaunch &launch, cuda::CUstream stream,
                           int device, int warmup, int repeats,
                           double giveUpMs) {
  size_t call = 0;
  Timing t;
  std::vector<double> times;
  auto timedCall = [&]() -> Expected<float> {
    Expected<cuda::Event> start = cuda::Event::create(device);
    Expected<cuda::Event> end = cuda::Event::create(device);
    if (!start.ok() || !end.ok())
      return start.ok() ? end.status() : start.status();
    LINA_RETURN_IF_ERROR(start->record(stream));
    LINA_RETURN_IF_ERROR(launch(call++));
    LINA_RETURN_IF_ERROR(end->record(stream));
    return cuda::Event::elapsedMilliseconds(*start, *end);
  };
  if (warmup > 0 && giveUpMs > 0) {
    // The first warm-up call is timed too: a candidate many times slower
    // than the best costs one call, not warmup + repeats. (It may include
    // the module's lazy loading, a few ms at most.)
    Expected<float> first = timedCall();
    if (!first.ok())
      return first.status();
    --warmup;
    if (*first > giveUpMs) {
      t.medianMs = *first;
      t.calls = 1;
      t.stoppedEarly = true;
      return t;
    }
  }
  for (int i = 0; i < warmup; ++i)
    LINA_RETURN_IF_ERROR(launch(call++));
  LINA_RETURN_IF_ERROR(cuda::synchronizeDevice(device));
  for (int i = 0; i < repeats; ++i) {
    Expected<float> ms = timedCall();
    if (!ms.ok())
      return ms.status();
    times.push_back(*ms);
    if (i == 0 && giveUpMs > 0 && *ms > giveUpMs) {
      t.stoppedEarly = true;
      break;
    }
  }
  std::sort(times.begin(), times.end());
  t.medianMs = times[times.size() / 2];
  t.calls = static_cast<int>(times.size());
  return t;
}

Expected<Timing> timeForward(const ChunkKernel &kernel,
                             const RotatingInputs &inputs, int device,
                             int warmup, int repeats, double giveUpMs) {
  return timeCalls(
      [&](size_t call) { return kernel.forward(inputs.args(call)); },
      inputs.args(0).stream, device, warmup, repeats, giveUpMs);
}

} // namespace lina
