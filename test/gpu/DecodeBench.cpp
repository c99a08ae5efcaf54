//===- DecodeBench.cpp - lina-decode-suite --bench ----------------------===//
//
// Part of lina. Times one decode step (T = 1, bf16, the pool form with a
// slot per sequence) at batch 1, 32 and 256 with 32 heads of 128 x 128:
// the median of 200 launches, CUDA events, after 20 warm-up launches. The
// state is read and written once per step, so GB/s counts 2 x its bytes
// (inputs and outputs add under 1%). bench/decode_fla.py compares with fla.
// `--sweep` also times every schedule of the tuner's space at each batch,
// which is what the by-batch default (defaultDecodeSchedule) is chosen from.
//
//===----------------------------------------------------------------------===//
#include "DecodeSuite.h"

#include "lina/Codegen/DecodePlanner.h"
#include "lina/Runtime/Device.h"
#include "lina/Runtime/Event.h"
#include "lina/Runtime/Memory.h"
#include "lina/Spec/Presets.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

namespace lina::decodesuite {
namespace {

Expected<cuda::DeviceBuffer> zeros(int device, size_t bytes) {
  Expected<cuda::DeviceBuffer> buffer =
      cuda::DeviceBuffer::allocate(device, bytes);
  if (!buffer.ok())
    return buffer.status();
  std::vector<uint8_t> zero(bytes, 0);
  LINA_RETURN_IF_ERROR(buffer->copyFromHost(zero.data(), bytes));
  return buffer;
}

const void *at(const cuda::DeviceBuffer &b) {
  return reinterpret_cast<const void *>(static_cast<uintptr_t>(b.pointer()));
}

Expected<double> medianMicroseconds(const DecodeKernel &kernel,
                                    const DecodeArgs &args, int device) {
  for (int i = 0; i < 20; ++i)
    LINA_RETURN_IF_ERROR(kernel.forward(args));
  std::vector<double> times;
  Expected<cuda::Event> start = cuda::Event::create(device);
  Expected<cuda::Event> end = cuda::Event::create(device);
  if (!start.ok() || !end.ok())
    return start.ok() ? end.status() : start.status();
  for (int i = 0; i < 200; ++i) {
    LINA_RETURN_IF_ERROR(start->record(args.stream));
    LINA_RETURN_IF_ERROR(kernel.forward(args));
    LINA_RETURN_IF_ERROR(end->record(args.stream));
    Expected<float> ms = cuda::Event::elapsedMilliseconds(*start, *end);
    if (!ms.ok())
      return ms.status();
    times.push_back(*ms * 1e3);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

Spec benchSpec(const std::string &preset) {
  Spec spec = findPreset(preset)->spec;
  spec.keyDim = spec.valueDim = 128;
  spec.heads = spec.valueHeads = 32;
  spec.dtype = DType::BF16;
  return spec;
}

/// Times one schedule ({0, 0}: the default, chosen by batch), prints a line
/// and returns the median in microseconds.
Expected<double> benchOne(const std::string &preset, int64_t batch, int device,
                          const DecodeSchedule &schedule) {
  Spec spec = benchSpec(preset);
  Expected<DecodePlan> plan = planDecodeKernel(spec, schedule);
  if (!plan.ok())
    return plan.status();
  Expected<DecodeKernel> kernel = DecodeKernel::load(*plan, device);
  if (!kernel.ok())
    return kernel.status();
  const int64_t H = spec.heads, HV = spec.valueHeads, K = spec.keyDim,
                V = spec.valueDim;
  const size_t stateBytes = size_t(batch * HV * K * V) * 4;
  std::vector<cuda::DeviceBuffer> buffers;
  Status allocation;
  auto make = [&](size_t bytes) -> const void * {
    Expected<cuda::DeviceBuffer> b = zeros(device, std::max<size_t>(bytes, 4));
    if (!b.ok()) {
      allocation = b.status();
      return nullptr;
    }
    buffers.push_back(std::move(*b));
    return at(buffers.back());
  };
  DecodeArgs args;
  args.q = make(batch * H * K * 2);
  args.k = make(batch * H * K * 2);
  args.v = make(batch * HV * V * 2);
  args.o = const_cast<void *>(make(batch * HV * V * 2));
  if (spec.hasGate())
    args.g =
        static_cast<const float *>(make(batch * HV * spec.gateWidth() * 4));
  if (spec.beta != BetaSource::None)
    args.beta = static_cast<const float *>(make(batch * HV * 4));
  if (spec.update == UpdateRule::DPLR) {
    args.a = make(batch * HV * K * 2);
    args.b = make(batch * HV * K * 2);
  }
  args.state = static_cast<float *>(const_cast<void *>(make(stateBytes)));
  std::vector<int32_t> slots(batch);
  std::iota(slots.begin(), slots.end(), 0);
  args.stateIndices = static_cast<const int32_t *>(make(batch * 4));
  LINA_RETURN_IF_ERROR(allocation);
  LINA_RETURN_IF_ERROR(buffers.back().copyFromHost(slots.data(), batch * 4));
  args.numSlots = batch;
  args.batch = batch;
  args.seqLen = 1;
  Expected<double> us = medianMicroseconds(*kernel, args, device);
  if (!us.ok())
    return us.status();
  double gbps = 2.0 * double(stateBytes) / (*us * 1e-6) / 1e9;
  bool isDefault = schedule.warpColumns == 0 && schedule.warps == 0;
  std::printf("%-6s  B=%-4lld  %9.2f us/step  %8.1f GB/s of state  "
              "warp columns %lld, warps %lld%s\n",
              preset.c_str(), (long long)batch, *us, gbps,
              (long long)kernel->scheduleFor(batch, 1).warpColumns,
              (long long)kernel->scheduleFor(batch, 1).warps,
              isDefault ? " (default)" : "");
  std::fflush(stdout);
  return *us;
}

} // namespace

int runBench(int device, const std::vector<std::string> &presets, bool sweep) {
  std::printf("decode step, T = 1, bf16, 32 heads, K = V = 128, fp32 state "
              "pool (median of 200, CUDA events)\n");
  int status = kExitPass;
  for (const std::string &preset : presets)
    for (int64_t batch : {1, 32, 256}) {
      std::vector<DecodeSchedule> schedules = {DecodeSchedule()};
      if (sweep)
        for (const DecodeSchedule &s : decodeScheduleSpace(benchSpec(preset)))
          schedules.push_back(s);
      std::vector<double> times;
      for (const DecodeSchedule &schedule : schedules) {
        Expected<double> us = benchOne(preset, batch, device, schedule);
        if (!us.ok()) {
          std::printf("%-6s  B=%-4lld  FAILED: %s\n", preset.c_str(),
                      (long long)batch, us.message().c_str());
          status = kExitFail;
          break;
        }
        times.push_back(*us);
      }
      if (sweep && times.size() == schedules.size()) {
        double atDefault = times.front();
        double best = *std::min_element(times.begin(), times.end());
        std::printf("%-6s  B=%-4lld  best %.2f us, the default %.2f us "
                    "(%.2fx)\n",
                    preset.c_str(), (long long)batch, best, atDefault,
                    atDefault / best);
      }
    }
  return status;
}

} // namespace lina::decodesuite
