//===- ChunkKernel.cpp - Launching generated chunkwise kernels ---------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Runtime/ChunkKernel.h"
#include "lina/Runtime/Device.h"
#include "lina/Runtime/ForwardChecks.h"
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

} // namespace

Expected<ChunkKernel> ChunkKernel::load(const KernelPlan &plan, int ordinal) {
  Expected<cuda::Device> device = cuda::queryDevice(ordinal);
  if (!device.ok())
    return device.status();
  unsigned shared = std::max(plan.scanSharedBytes, plan.outputSharedBytes);
  if (shared > static_cast<unsigned>(device->sharedMemoryPerBlockOptin))
    return invalid("the kernel needs " + std::to_string(shared) +
                   " bytes of shared memory; " + device->name + " allows " +
                   std::to_string(device->sharedMemoryPerBlockOptin) +
                   ": use a smaller chunk size or tile-v");
  const cuda::Nvrtc &nvrtc = cuda::Nvrtc::get();
  if (!nvrtc.available())
    return nvrtc.status();
  cuda::CompileOptions options;
  options.arch = device->arch;
  options.programName = "lina_kernel.cu";
  Expected<cuda::CompiledKernel> compiled = nvrtc.compile(plan.source, options);
  if (!compiled.ok())
    return compiled.status();
  Expected<cuda::Module> module = cuda::Module::load(ordinal, compiled->cubin);
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
  LINA_RETURN_IF_ERROR(checkForwardArgs(plan_, args));
  if (args.checkInputs || inputChecksRequestedByEnvironment())
    LINA_RETURN_IF_ERROR(checkInputValues(plan_, args, ordinal_));
  int64_t sequences = s.varlen ? args.numSequences : args.batch;
  int64_t ctas = sequences * s.valueHeads * plan_.valueTiles();

  LaunchParams p{args.q,        args.k,           args.v,
                 args.g,        args.beta,        args.a,
                 args.b,        args.gateALog,    args.gateDtBias,
                 args.o,        args.initialState, args.finalState,
                 args.cuSeqlens, nullptr,         args.batch,
                 args.seqLen,   sequences};
  int64_t tokens = args.batch * args.seqLen;
  int64_t chunks = (args.seqLen + plan_.chunkSize - 1) / plan_.chunkSize;
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
