//===- DeviceCheck.cpp - A generated kernel against the reference ------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "DeviceUpload.h"
#include "lina/Reference/DeviceCheck.h"
#include "lina/Reference/Reference.h"
#include "lina/Runtime/Device.h"
#include "lina/Runtime/Event.h"
#include "lina/Runtime/ForwardChecks.h"
#include "lina/Runtime/Memory.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace lina::reference {
namespace {

double now() {
  using Clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

std::vector<float> roundToFloat(std::vector<double> &values) {
  std::vector<float> singles(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    singles[i] = static_cast<float>(values[i]);
    values[i] = singles[i];
  }
  return singles;
}

} // namespace

HostInputs encodeProblem(Problem &p) {
  HostInputs inputs;
  DType dtype = p.spec.dtype;
  inputs.q = encodeInPlace(p.q, dtype);
  inputs.k = encodeInPlace(p.k, dtype);
  inputs.v = encodeInPlace(p.v, dtype);
  inputs.a = encodeInPlace(p.a, dtype);
  inputs.b = encodeInPlace(p.b, dtype);
  inputs.g = roundToFloat(p.g);
  inputs.beta = roundToFloat(p.beta);
  inputs.gateALog = roundToFloat(p.gateALog);
  inputs.gateDtBias = roundToFloat(p.gateDtBias);
  inputs.initialState = roundToFloat(p.initialState);
  inputs.cuSeqlens = p.cuSeqlens;
  return inputs;
}

/// Uploads, launches once, waits and downloads.
Expected<DeviceRun> runOnDevice(const ChunkKernel &kernel, const Problem &p,
                                const HostInputs &in, int device,
                                int timedRepeats, bool misalignInputs) {
  const Spec &spec = p.spec;
  DeviceInputs inputs;
  ForwardArgs args;
  LINA_RETURN_IF_ERROR(uploadInputs(
      device, in, inputs, args,
      misalignInputs ? requiredTensorAlignment(spec.dtype) : 0));

  const size_t outputCount =
      size_t(p.batch * p.seqLen * spec.valueHeads) * size_t(spec.valueDim);
  const size_t stateCount = size_t(p.numSequences() * spec.valueHeads) *
                            size_t(spec.keyDim * spec.valueDim);
  // A misaligned run's output starts one element past a 16-byte boundary
  // too: the scans write it from their products' epilogues, a few elements
  // at a time (global_rows).
  Expected<GuardedOutput> o = GuardedOutput::create(
      device, outputCount * elementBytes(spec.dtype), nanPattern(spec.dtype),
      misalignInputs ? requiredTensorAlignment(spec.dtype) : 0);
  if (!o.ok())
    return o.status();
  Expected<GuardedOutput> state = GuardedOutput::create(
      device, stateCount * sizeof(float), nanPattern(DType::F32));
  if (!state.ok())
    return state.status();
  args.o = o->pointer();
  // A spec without a final state has no such output: the kernel refuses a
  // pointer for it.
  args.finalState =
      spec.finalState ? static_cast<float *>(state->pointer()) : nullptr;
  args.batch = p.batch;
  args.seqLen = p.seqLen;
  // ForwardArgs documents numSequences for varlen only; batch rows are the
  // sequences otherwise.
  args.numSequences = spec.varlen ? p.numSequences() : 0;

  double start = now();
  LINA_RETURN_IF_ERROR(kernel.forward(args));
  LINA_RETURN_IF_ERROR(cuda::synchronizeDevice(device));
  DeviceRun run;
  run.milliseconds = (now() - start) * 1e3;

  std::vector<uint8_t> bytes;
  LINA_RETURN_IF_ERROR(o->download(bytes, "o"));
  run.o = decode(bytes.data(), outputCount, spec.dtype);
  if (spec.finalState) {
    LINA_RETURN_IF_ERROR(state->download(bytes, "finalState"));
    run.finalState = decode(bytes.data(), stateCount, DType::F32);
  }
  if (timedRepeats > 0) {
    Expected<double> median = medianEventMilliseconds(
        [&] { return kernel.forward(args); }, args.stream, device,
        timedRepeats);
    if (!median.ok())
      return median.status();
    run.medianMilliseconds = *median;
  }
  return run;
}


Comparison compareWithReference(const Problem &p, const DeviceRun &run) {
  Result expected = runRecurrent(p);
  Comparison c;
  c.referenceOverflowed = !isFinite(expected);
  c.outputError = relativeError(run.o, expected.o);
  if (p.spec.finalState)
    c.stateError = relativeError(run.finalState, expected.finalState);
  double limit = tolerance(p.spec.dtype);
  c.passed = !c.referenceOverflowed && c.outputError <= limit &&
             c.stateError <= limit;
  return c;
}

} // namespace lina::reference
