//===- InputValues.cpp - Opt-in checks of device tensors' values -------===//
//
// Part of lina. cu_seqlens and the gates live on the device, so checking
// their values means waiting for the stream and copying them back. That is
// why this runs only when asked for (ForwardArgs::checkInputs or
// LINA_CHECK_INPUTS=1); the checks themselves are the host functions in
// ForwardChecks.cpp.
//
//===----------------------------------------------------------------------===//
#include "lina/Runtime/Device.h"
#include "lina/Runtime/Driver.h"
#include "lina/Runtime/ForwardChecks.h"

#include <algorithm>
#include <vector>

namespace lina {

namespace {

/// Copies \p count fp32 values from the device in blocks (a per-channel gate
/// of a long sequence is gigabytes) and checks each block.
Status checkFiniteOnDevice(const char *name, const float *device,
                           int64_t count) {
  constexpr int64_t kBlock = int64_t(1) << 22;
  std::vector<float> host(static_cast<size_t>(std::min(count, kBlock)));
  for (int64_t start = 0; start < count; start += kBlock) {
    int64_t n = std::min(kBlock, count - start);
    LINA_RETURN_IF_ERROR(LINA_CU(
        cuMemcpyDtoH_v2(host.data(),
                        static_cast<cuda::CUdeviceptr>(
                            reinterpret_cast<uintptr_t>(device + start)),
                        static_cast<size_t>(n) * sizeof(float))));
    LINA_RETURN_IF_ERROR(checkFiniteValues(name, host.data(), n, start));
  }
  return Status();
}

} // namespace

Status checkInputValues(const KernelPlan &plan, const ForwardArgs &args,
                        int ordinal) {
  const Spec &s = plan.spec;
  LINA_RETURN_IF_ERROR(cuda::makeCurrent(ordinal));
  // The inputs may still be being written by work queued on the stream.
  LINA_RETURN_IF_ERROR(cuda::synchronizeStream(args.stream));
  if (s.varlen && args.cuSeqlens) {
    std::vector<int64_t> cu(static_cast<size_t>(args.numSequences + 1));
    LINA_RETURN_IF_ERROR(LINA_CU(
        cuMemcpyDtoH_v2(cu.data(),
                        static_cast<cuda::CUdeviceptr>(
                            reinterpret_cast<uintptr_t>(args.cuSeqlens)),
                        cu.size() * sizeof(int64_t))));
    LINA_RETURN_IF_ERROR(checkCuSeqlensValues(
        cu.data(), static_cast<int64_t>(cu.size()), args.seqLen));
  }
  for (const TensorExtent &t : tensorExtents(s, args)) {
    const void *p = t.pointer;
    if (p != args.g && p != args.beta && p != args.gateALog &&
        p != args.gateDtBias)
      continue;
    LINA_RETURN_IF_ERROR(
        checkFiniteOnDevice(t.name, static_cast<const float *>(p),
                            static_cast<int64_t>(t.bytes / sizeof(float))));
  }
  return Status();
}

} // namespace lina
