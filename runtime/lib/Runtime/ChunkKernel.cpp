//===- ChunkKernel.cpp - Launching generated chunkwise kernels ---------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Runtime/ChunkKernel.h"
#include "lina/Runtime/Device.h"
#include "lina/Runtime/Nvrtc.h"

#include <cstdint>

namespace lina {

const char *toString(Strategy s) {
  return s == Strategy::Materialize ? "materialize" : "fused";
}

namespace {

/// Same layout as lina::Params in the device prelude (Prelude.cuh).
struct LaunchParams {
  const void *q, *k, *v;
  const float *g, *beta;
  const void *a, *b;
  const float *gateALog, *gateDtBias;
  void *o;
  const float *initialState;
  float *finalState;
  const int64_t *cuSeqlens;
  float *chunkStates;
  long long batch, seqLen, numSeqs;
};
// 14 pointers and 3 integers, 8 bytes each, no padding: as the device sees it.
static_assert(sizeof(LaunchParams) == 17 * 8,
              "LaunchParams must match lina::Params in Prelude.cuh");

Status invalid(const std::string &message) {
  return Status::error(StatusCode::InvalidArgument, message);
}

size_t elementBytes(DType d) { return d == DType::F32 ? 4 : 2; }

/// A required pointer is present and aligned to its element; an unused one
/// is absent (a stray pointer means the caller and the spec disagree).
Status checkPointer(const void *p, const char *name, bool used, size_t align,
                    const char *why) {
  if (used && !p)
    return invalid(std::string("'") + name + "' is required: " + why);
  if (!used && p)
    return invalid(std::string("'") + name + "' was given but the spec does "
                                             "not use it: " + why);
  if (p && reinterpret_cast<uintptr_t>(p) % align != 0)
    return invalid(std::string("'") + name + "' is not aligned to " +
                   std::to_string(align) + " bytes");
  return Status();
}

Status checkSharedMemory(const KernelPlan &plan, const cuda::Device &device) {
  unsigned shared = std::max(plan.scanSharedBytes, plan.outputSharedBytes);
  if (shared > static_cast<unsigned>(device.sharedMemoryPerBlockOptin))
    return invalid("the kernel needs " + std::to_string(shared) +
                   " bytes of shared memory; " + device.name + " allows " +
                   std::to_string(device.sharedMemoryPerBlockOptin) +
                   ": use a smaller chunk size or tile-v");
  return Status();
}

} // namespace

cuda::CompileOptions kernelCompileOptions(const std::string &arch) {
  cuda::CompileOptions options;
  options.arch = arch;
  options.programName = "lina_kernel.cu";
  return options;
}

Expected<ChunkKernel> ChunkKernel::load(const KernelPlan &plan, int ordinal) {
  Expected<cuda::Device> device = cuda::queryDevice(ordinal);
  if (!device.ok())
    return device.status();
  // Before compiling: a kernel that cannot launch here is not worth NVRTC's
  // time.
  LINA_RETURN_IF_ERROR(checkSharedMemory(plan, *device));
  const cuda::Nvrtc &nvrtc = cuda::Nvrtc::get();
  if (!nvrtc.available())
    return nvrtc.status();
  Expected<cuda::CompiledKernel> compiled =
      nvrtc.compile(plan.source, kernelCompileOptions(device->arch));
  if (!compiled.ok())
    return compiled.status();
  return loadImage(plan, compiled->cubin, ordinal);
}

Expected<ChunkKernel> ChunkKernel::loadImage(const KernelPlan &plan,
                                             const std::string &image,
                                             int ordinal) {
  Expected<cuda::Device> device = cuda::queryDevice(ordinal);
  if (!device.ok())
    return device.status();
  LINA_RETURN_IF_ERROR(checkSharedMemory(plan, *device));
  Expected<cuda::Module> module = cuda::Module::load(ordinal, image);
  if (!module.ok())
    return module.status();
  ChunkKernel kernel;
  kernel.plan_ = plan;
  kernel.ordinal_ = ordinal;
  kernel.module_ = std::make_shared<cuda::Module>(std::move(*module));
  Expected<cuda::Kernel> scan = kernel.module_->kernel(plan.scanKernel);
  if (!scan.ok())
    return scan.status();
  kernel.scan_ = *scan;
  if (plan.strategy == Strategy::Materialize) {
    Expected<cuda::Kernel> output = kernel.module_->kernel(plan.outputKernel);
    if (!output.ok())
      return output.status();
    kernel.output_ = *output;
  }
  kernel.workspace_ = std::make_shared<Workspace>();
  return kernel;
}

Status ChunkKernel::forward(const ForwardArgs &args) const {
  const Spec &s = plan_.spec;
  size_t el = elementBytes(s.dtype);
  bool dplr = s.update == UpdateRule::DPLR;
  bool computedGate = s.gate != GateSource::Given;
  LINA_RETURN_IF_ERROR(checkPointer(args.q, "q", true, el, "[B, T, H, K]"));
  LINA_RETURN_IF_ERROR(checkPointer(args.k, "k", true, el, "[B, T, H, K]"));
  LINA_RETURN_IF_ERROR(checkPointer(args.v, "v", true, el, "[B, T, HV, V]"));
  LINA_RETURN_IF_ERROR(checkPointer(args.o, "o", true, el, "[B, T, HV, V]"));
  LINA_RETURN_IF_ERROR(checkPointer(args.g, "g", s.hasGate(), 4,
                                    "fp32 log gates (decay is not none)"));
  LINA_RETURN_IF_ERROR(checkPointer(args.beta, "beta",
                                    s.beta != BetaSource::None, 4,
                                    "fp32 [B, T, HV]"));
  LINA_RETURN_IF_ERROR(checkPointer(
      args.a, "a", dplr && s.lowRankA == LowRankSource::Input, el,
      "[B, T, HV, K] (dplr with low_rank_a = input)"));
  LINA_RETURN_IF_ERROR(checkPointer(
      args.b, "b", dplr && s.lowRankB == LowRankSource::Input, el,
      "[B, T, HV, K] (dplr with low_rank_b = input)"));
  LINA_RETURN_IF_ERROR(checkPointer(args.gateALog, "gateALog", computedGate, 4,
                                    "fp32 [HV] (gate computed in the kernel)"));
  if (args.gateDtBias && !computedGate)
    return invalid("'gateDtBias' was given but the gate is not computed in "
                   "the kernel");
  LINA_RETURN_IF_ERROR(checkPointer(args.initialState, "initialState",
                                    s.initialState, 4,
                                    "fp32 [N, HV, K, V] (spec initial_state)"));
  LINA_RETURN_IF_ERROR(checkPointer(args.finalState, "finalState",
                                    s.finalState, 4,
                                    "fp32 [N, HV, K, V] (spec final_state)"));
  LINA_RETURN_IF_ERROR(checkPointer(args.cuSeqlens, "cuSeqlens", s.varlen, 8,
                                    "int64 [N + 1] (spec varlen)"));
  if (args.batch < 1 || args.seqLen < 0)
    return invalid("batch must be at least 1 and seqLen at least 0, got " +
                   std::to_string(args.batch) + " and " +
                   std::to_string(args.seqLen));
  if (s.varlen && (args.batch != 1 || args.numSequences < 1))
    return invalid("varlen packs sequences along T: batch must be 1 and "
                   "numSequences at least 1");
  int64_t sequences = s.varlen ? args.numSequences : args.batch;
  int64_t ctas = sequences * s.valueHeads * plan_.valueTiles();
  if (ctas > INT32_MAX)
    return invalid("too many (sequence, head, value tile) blocks: " +
                   std::to_string(ctas));

  LaunchParams p{args.q,        args.k,           args.v,
                 args.g,        args.beta,        args.a,
                 args.b,        args.gateALog,    args.gateDtBias,
                 args.o,        args.initialState, args.finalState,
                 args.cuSeqlens, nullptr,         args.batch,
                 args.seqLen,   sequences};
  int64_t tokens = args.batch * args.seqLen;
  int64_t chunks = (args.seqLen + plan_.chunkSize - 1) / plan_.chunkSize;
  if (plan_.strategy == Strategy::Materialize && chunks > 65535)
    return invalid("more than 65535 chunks per sequence: use a larger chunk "
                   "size or the fused strategy");
  // The workspace is shared by calls on this kernel; calls on different
  // streams that overlap in time need their own ChunkKernel.
  std::unique_lock<std::mutex> lock(workspace_->mutex, std::defer_lock);
  if (plan_.strategy == Strategy::Materialize) {
    // One state per (sequence, chunk) slot; see chunk_slot in the prelude.
    size_t slots = tokens / plan_.chunkSize + sequences + 1;
    size_t bytes = slots * s.valueHeads * s.keyDim * s.valueDim * 4;
    lock.lock();
    if (workspace_->buffer.size() < bytes) {
      workspace_->buffer = cuda::DeviceBuffer();
      Expected<cuda::DeviceBuffer> buffer =
          cuda::DeviceBuffer::allocate(ordinal_, bytes);
      if (!buffer.ok())
        return buffer.status();
      workspace_->buffer = std::move(*buffer);
    }
    p.chunkStates = reinterpret_cast<float *>(workspace_->buffer.pointer());
  }
  cuda::LaunchConfig config;
  config.grid.x = static_cast<unsigned>(ctas);
  config.block.x = static_cast<unsigned>(plan_.threads);
  config.sharedMemoryBytes = plan_.scanSharedBytes;
  config.stream = args.stream;
  LINA_RETURN_IF_ERROR(scan_.launchWith(config, p));
  if (plan_.strategy == Strategy::Materialize && chunks > 0) {
    config.grid.y = static_cast<unsigned>(chunks);
    config.sharedMemoryBytes = plan_.outputSharedBytes;
    LINA_RETURN_IF_ERROR(output_.launchWith(config, p));
  }
  return Status();
}

} // namespace lina
