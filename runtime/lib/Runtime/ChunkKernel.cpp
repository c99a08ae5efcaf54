//===- ChunkKernel.cpp - Launching generated chunkwise kernels ---------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Runtime/ChunkKernel.h"
#include "lina/Runtime/Device.h"
#include "lina/Runtime/ForwardChecks.h"
#include "lina/Runtime/Nvrtc.h"

#include <algorithm>
#include <cstdint>

namespace lina {

const char *toString(Strategy s) {
  switch (s) {
  case Strategy::FusedScan:
    return "fused";
  case Strategy::Materialize:
    return "materialize";
  case Strategy::Split:
    return "split";
  }
  return "fused";
}

bool parseStrategy(const std::string &name, Strategy &out) {
  for (Strategy s : {Strategy::FusedScan, Strategy::Materialize,
                     Strategy::Split})
    if (name == toString(s)) {
      out = s;
      return true;
    }
  return false;
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
  float *chunkData;
  long long batch, seqLen, numSeqs;
};
// 15 pointers and 3 integers, 8 bytes each, no padding: as the device sees it.
static_assert(sizeof(LaunchParams) == 18 * 8,
              "LaunchParams must match lina::Params in Prelude.cuh");

Status invalid(const std::string &message) {
  return Status::error(StatusCode::InvalidArgument, message);
}

Status checkSharedMemory(const KernelPlan &plan, const cuda::Device &device) {
  unsigned shared = std::max(
      {plan.scanSharedBytes, plan.outputSharedBytes, plan.prepareSharedBytes});
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
  if (!plan.prepareKernel.empty()) {
    Expected<cuda::Kernel> prepare = kernel.module_->kernel(plan.prepareKernel);
    if (!prepare.ok())
      return prepare.status();
    kernel.prepare_ = *prepare;
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
                 args.cuSeqlens, nullptr,         nullptr,
                 args.batch,    args.seqLen,      sequences};
  int64_t tokens = args.batch * args.seqLen;
  int64_t chunks = (args.seqLen + plan_.chunkSize - 1) / plan_.chunkSize;
  bool chunkParallel = plan_.strategy != Strategy::FusedScan;
  // The workspace is shared by calls on this kernel; calls on different
  // streams that overlap in time need their own ChunkKernel.
  std::unique_lock<std::mutex> lock(workspace_->mutex, std::defer_lock);
  if (chunkParallel) {
    size_t bytes = std::max<size_t>(plan_.workspaceSlots(tokens, sequences) *
                                        s.valueHeads *
                                        plan_.workspaceRecordFloats() * 4,
                                    4);
    lock.lock();
    if (workspace_->buffer.size() < bytes) {
      workspace_->buffer = cuda::DeviceBuffer();
      Expected<cuda::DeviceBuffer> buffer =
          cuda::DeviceBuffer::allocate(ordinal_, bytes);
      if (!buffer.ok())
        return buffer.status();
      workspace_->buffer = std::move(*buffer);
    }
    float *workspace = reinterpret_cast<float *>(workspace_->buffer.pointer());
    (plan_.strategy == Strategy::Materialize ? p.chunkStates : p.chunkData) =
        workspace;
  }
  cuda::LaunchConfig config;
  config.block.x = static_cast<unsigned>(plan_.threads);
  config.stream = args.stream;
  if (!plan_.prepareKernel.empty() && chunks > 0) {
    // One CTA per (sequence, value head, chunk), all value columns at once.
    config.grid.x = static_cast<unsigned>(sequences * s.valueHeads);
    config.grid.y = static_cast<unsigned>(chunks);
    config.sharedMemoryBytes = plan_.prepareSharedBytes;
    LINA_RETURN_IF_ERROR(prepare_.launchWith(config, p));
  }
  config.grid.x = static_cast<unsigned>(ctas);
  config.grid.y = 1;
  config.sharedMemoryBytes = plan_.scanSharedBytes;
  LINA_RETURN_IF_ERROR(scan_.launchWith(config, p));
  if (plan_.strategy == Strategy::Materialize && chunks > 0) {
    config.grid.y = static_cast<unsigned>(chunks);
    config.sharedMemoryBytes = plan_.outputSharedBytes;
    LINA_RETURN_IF_ERROR(output_.launchWith(config, p));
  }
  return Status();
}

} // namespace lina
