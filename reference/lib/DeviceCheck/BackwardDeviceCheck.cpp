//===- BackwardDeviceCheck.cpp - A generated backward on the device ------===//
//
// Part of lina. The backward's half of DeviceCheck.h: the forward's inputs
// and the output gradients uploaded, every gradient buffer poisoned between
// guard bands, one backward call, the gradients decoded.
//
//===----------------------------------------------------------------------===//
#include "DeviceUpload.h"
#include "lina/Reference/DeviceCheck.h"
#include "lina/Runtime/Device.h"

#include <algorithm>
#include <memory>

namespace lina::reference {


Expected<DeviceBackwardRun>
runBackwardOnDevice(const BackwardKernel &kernel, const Problem &p,
                    const HostInputs &in, std::vector<double> &dO,
                    const std::vector<double> &dFinalState, int device,
                    int timedRepeats) {
  const Spec &spec = p.spec;
  DeviceInputs inputs;
  BackwardArgs args;
  LINA_RETURN_IF_ERROR(uploadInputs(device, in, inputs, args.forward));
  args.forward.batch = p.batch;
  args.forward.seqLen = p.seqLen;
  args.forward.numSequences = spec.varlen ? p.numSequences() : 0;
  const void *pointer = nullptr;
  std::vector<uint8_t> dOBytes = encodeInPlace(dO, spec.dtype);
  LINA_RETURN_IF_ERROR(inputs.upload(device, dOBytes, pointer));
  args.dO = pointer;
  std::vector<float> dht(dFinalState.begin(), dFinalState.end());
  LINA_RETURN_IF_ERROR(inputs.upload(device, dht, pointer));
  args.dFinalState = static_cast<const float *>(pointer);

  // One poisoned, guarded fp32 buffer for each gradient the call has: the
  // sizes of the problem's own inputs.
  struct Buffer {
    const char *name;
    const std::vector<double> &input;
    float *BackwardArgs::*field;
    std::vector<double> Gradients::*gradient;
    std::unique_ptr<GuardedOutput> output;
  };
  std::vector<Buffer> buffers;
  auto add = [&](const char *name, const std::vector<double> &input,
                 float *BackwardArgs::*field,
                 std::vector<double> Gradients::*gradient) {
    buffers.push_back({name, input, field, gradient, nullptr});
  };
  add("dq", p.q, &BackwardArgs::dq, &Gradients::dq);
  add("dk", p.k, &BackwardArgs::dk, &Gradients::dk);
  add("dv", p.v, &BackwardArgs::dv, &Gradients::dv);
  add("dg", p.g, &BackwardArgs::dg, &Gradients::dg);
  add("dbeta", p.beta, &BackwardArgs::dBeta, &Gradients::dBeta);
  add("da", p.a, &BackwardArgs::da, &Gradients::da);
  add("db", p.b, &BackwardArgs::db, &Gradients::db);
  add("dA_log", p.gateALog, &BackwardArgs::dGateALog, &Gradients::dGateALog);
  add("ddt_bias", p.gateDtBias, &BackwardArgs::dGateDtBias,
      &Gradients::dGateDtBias);
  add("dh0", p.initialState, &BackwardArgs::dInitialState,
      &Gradients::dInitialState);
  for (Buffer &b : buffers) {
    if (b.input.empty())
      continue;
    Expected<GuardedOutput> output = GuardedOutput::create(
        device, b.input.size() * sizeof(float), nanPattern(DType::F32));
    if (!output.ok())
      return output.status();
    b.output = std::make_unique<GuardedOutput>(std::move(output).value());
    args.*b.field = static_cast<float *>(b.output->pointer());
  }

  LINA_RETURN_IF_ERROR(kernel.backward(args));
  LINA_RETURN_IF_ERROR(cuda::synchronizeDevice(device));
  DeviceBackwardRun run;
  std::vector<uint8_t> bytes;
  for (Buffer &b : buffers) {
    if (!b.output)
      continue;
    LINA_RETURN_IF_ERROR(b.output->download(bytes, b.name));
    run.gradients.*b.gradient =
        decode(bytes.data(), b.input.size(), DType::F32);
  }
  if (timedRepeats > 0) {
    Expected<double> median = medianEventMilliseconds(
        [&] { return kernel.backward(args); }, args.forward.stream, device,
        timedRepeats);
    if (!median.ok())
      return median.status();
    run.medianMilliseconds = *median;
  }
  return run;
}

} // namespace lina::reference
