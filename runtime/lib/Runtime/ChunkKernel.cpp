//===- ChunkKernel.cpp - Launching generated chunkwise kernels ---------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "TensorMaps.h"
#include "LaunchParams.h"
#include "lina/Runtime/ChunkKernel.h"
#include "lina/Runtime/Device.h"
#include "lina/Runtime/ForwardChecks.h"
#include "lina/Runtime/Nvrtc.h"
#include "lina/Runtime/WorkspaceLayout.h"

#include <algorithm>
#include <cstdint>
#include <vector>

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

/// Same layout as lina::SegmentParams in the device library (Segments.cuh).
struct SegmentLaunchParams {
  const float *initialState;
  float *finalState;
  const float *localStates;
  void *startStates; // bf16
  float *runPrefix;
  long long segments, runChunks, runs;
};
static_assert(sizeof(SegmentLaunchParams) == 8 * 8,
              "SegmentLaunchParams must match lina::SegmentParams");

Status invalid(const std::string &message) {
  return Status::error(StatusCode::InvalidArgument, message);
}

Status checkSharedMemory(const KernelPlan &plan, const cuda::Device &device) {
  unsigned shared =
      std::max({plan.scanSharedBytes, plan.outputSharedBytes,
                plan.prepareSharedBytes, plan.carrySharedBytes});
  if (shared > static_cast<unsigned>(device.sharedMemoryPerBlockOptin))
    return invalid("the kernel needs " + std::to_string(shared) +
                   " bytes of shared memory; " + device.name + " allows " +
                   std::to_string(device.sharedMemoryPerBlockOptin) +
                   ": use a smaller chunk size or tile-v");
  return Status();
}

} // namespace

SequencePieces segmentPieces(int64_t seqLen, int64_t segments,
                             int64_t chunkSize) {
  SequencePieces whole{1, seqLen};
  if (segments <= 1 || seqLen <= 0 || chunkSize <= 0)
    return whole;
  // Whole chunks a segment: only the sequence's last chunk is partial.
  int64_t length =
      ((seqLen + segments - 1) / segments + chunkSize - 1) / chunkSize *
      chunkSize;
  int64_t count = (seqLen + length - 1) / length;
  return count > 1 ? SequencePieces{count, length} : whole;
}

SequencePieces segmentsFor(const KernelPlan &plan, const ForwardArgs &args,
                           int64_t smCount) {
  if (!plan.spec.varlen)
    return segmentPieces(args.seqLen, plan.segments, plan.chunkSize);
  SequencePieces whole{1, args.seqLen};
  int64_t heads = args.numSequences * plan.spec.valueHeads;
  if (plan.segments <= 1 || heads <= 0 || 2 * heads > smCount)
    return whole;
  int64_t segments = std::min<int64_t>(plan.segments, 2 * smCount / heads);
  // A piece of the packed total bounds every sequence's (sequence_bounds
  // cuts each by its own length, the same rule).
  SequencePieces bound = segmentPieces(args.seqLen, segments, plan.chunkSize);
  return bound.count > 1 ? SequencePieces{segments, bound.length} : whole;
}

cuda::CompileOptions kernelCompileOptions(const std::string &arch) {
  cuda::CompileOptions options;
  options.arch = arch;
  options.programName = "lina_kernel.cu";
  return options;
}

Status checkKernelArch(const KernelPlan &plan, const std::string &arch,
                       const std::string &gpuName) {
  if (plan.needsSm90a && arch != "sm_90")
    return Status::error(StatusCode::InvalidArgument,
                         "the kernel uses wgmma (the schedule's mma "
                         "warpgroup), which only sm_90 GPUs have; " +
                             gpuName + " is " + arch +
                             ": plan it with --mma warp");
  return Status();
}

std::string kernelArch(const KernelPlan &plan, const std::string &arch) {
  return plan.needsSm90a && arch == "sm_90" ? "sm_90a" : arch;
}

cuda::CompileOptions kernelCompileOptions(const KernelPlan &plan,
                                          const std::string &arch) {
  return kernelCompileOptions(kernelArch(plan, arch));
}

Expected<ChunkKernel> ChunkKernel::load(const KernelPlan &plan, int ordinal) {
  Expected<cuda::Device> device = cuda::queryDevice(ordinal);
  if (!device.ok())
    return device.status();
  // Before compiling: a kernel that cannot launch here is not worth NVRTC's
  // time.
  LINA_RETURN_IF_ERROR(checkSharedMemory(plan, *device));
  LINA_RETURN_IF_ERROR(checkKernelArch(plan, device->arch, device->name));
  const cuda::Nvrtc &nvrtc = cuda::Nvrtc::get();
  if (!nvrtc.available())
    return nvrtc.status();
  Expected<cuda::CompiledKernel> compiled =
      nvrtc.compile(plan.source, kernelCompileOptions(plan, device->arch));
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
  LINA_RETURN_IF_ERROR(checkKernelArch(plan, device->arch, device->name));
  Expected<cuda::Module> module = cuda::Module::load(ordinal, image);
  if (!module.ok())
    return module.status();
  ChunkKernel kernel;
  kernel.plan_ = plan;
  kernel.ordinal_ = ordinal;
  kernel.smCount_ = device->smCount;
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
  if (plan.segments > 1) {
    for (auto [name, handle] : {std::pair{&plan.combineKernel, &kernel.combine_},
                                std::pair{&plan.carryKernel, &kernel.carry_}}) {
      Expected<cuda::Kernel> loaded = kernel.module_->kernel(*name);
      if (!loaded.ok())
        return loaded.status();
      *handle = *loaded;
    }
  }
  kernel.workspace_ = std::make_shared<OwnWorkspace>();
  return kernel;
}

Status ChunkKernel::prepare(const ForwardArgs &args,
                           ForwardWorkspaceLayout &layout) const {
  LINA_RETURN_IF_ERROR(checkForwardArgs(plan_, args));
  if (args.checkInputs || inputChecksRequestedByEnvironment())
    LINA_RETURN_IF_ERROR(checkInputValues(plan_, args, ordinal_));
  Expected<ForwardWorkspaceLayout> laid =
      forwardWorkspaceLayout(plan_, shapeOf(args), smCount_);
  if (!laid.ok())
    return laid.status();
  layout = *laid;
  return Status();
}

Expected<size_t> ChunkKernel::workspaceBytes(const ForwardArgs &args) const {
  Expected<ForwardWorkspaceLayout> layout =
      forwardWorkspaceLayout(plan_, shapeOf(args), smCount_);
  if (!layout.ok())
    return layout.status();
  return layout->bytes;
}

Status ChunkKernel::forward(const ForwardArgs &args) const {
  ForwardWorkspaceLayout layout;
  LINA_RETURN_IF_ERROR(prepare(args, layout));
  if (layout.bytes == 0)
    return launch(args, layout, nullptr);
  // The kernel's own workspace is shared by every call on it, so it is
  // held until the launches are queued; calls on different streams that
  // overlap in time must lend their own (forward(args, workspace)).
  std::lock_guard<std::mutex> lock(workspace_->mutex);
  if (workspace_->buffer.size() < layout.bytes) {
    workspace_->buffer = cuda::DeviceBuffer();
    Expected<cuda::DeviceBuffer> buffer =
        cuda::DeviceBuffer::allocate(ordinal_, layout.bytes);
    if (!buffer.ok())
      return buffer.status();
    workspace_->buffer = std::move(*buffer);
  }
  return launch(args, layout,
                reinterpret_cast<char *>(workspace_->buffer.pointer()));
}

Status ChunkKernel::forward(const ForwardArgs &args,
                            const Workspace &workspace) const {
  ForwardWorkspaceLayout layout;
  LINA_RETURN_IF_ERROR(prepare(args, layout));
  LINA_RETURN_IF_ERROR(checkWorkspace(layout.bytes, workspace));
  std::vector<TensorBytes> tensors;
  for (const TensorExtent &e : tensorExtents(plan_.spec, args))
    tensors.push_back({e.name, e.pointer, e.bytes});
  LINA_RETURN_IF_ERROR(checkWorkspaceApart(layout.bytes, workspace, tensors));
  return launch(args, layout, static_cast<char *>(workspace.pointer));
}

Status ChunkKernel::launch(const ForwardArgs &args,
                           const ForwardWorkspaceLayout &layout,
                           char *base) const {
  const Spec &s = plan_.spec;
  int64_t sequences = s.varlen ? args.numSequences : args.batch;
  // With segments the prepare kernel and the scan see each segment as a
  // sequence of its own (sequence_bounds finds its tokens), started from
  // zero, its final state kept for the combine kernel.
  int64_t segments = layout.pieces.count;
  int64_t scanSequences = sequences * segments;
  int64_t scanLen = layout.pieces.length;
  int64_t ctas = scanSequences * s.valueHeads * plan_.valueTiles();

  LaunchParams p{args.q,        args.k,           args.v,
                 args.g,        args.beta,        args.a,
                 args.b,        args.gateALog,    args.gateDtBias,
                 args.o,        args.initialState, args.finalState,
                 args.cuSeqlens, nullptr,         nullptr,
                 args.batch,    scanLen,          scanSequences,
                 args.seqLen,   segments};
  int64_t chunks = (scanLen + plan_.chunkSize - 1) / plan_.chunkSize;
  SegmentLaunchParams segment{};
  if (layout.bytes > 0) {
    float *workspace = reinterpret_cast<float *>(base);
    (plan_.strategy == Strategy::Materialize ? p.chunkStates : p.chunkData) =
        workspace;
    if (segments > 1) {
      // After the records: the segments' own final states, their true
      // starting states (bf16, as the carry reads them), and the decay
      // before each run.
      char *local = base + layout.recordBytes;
      char *start = local + layout.segmentStatesBytes;
      float *prefix =
          reinterpret_cast<float *>(start + layout.segmentStatesBytes / 2);
      segment = {args.initialState,
                 args.finalState,
                 reinterpret_cast<float *>(local),
                 start,
                 prefix,
                 segments,
                 layout.runChunks,
                 layout.runs};
      p.initialState = nullptr;
      p.finalState = reinterpret_cast<float *>(local);
    }
  }
  // The wgmma scans' TMA descriptors before any launch: they refuse
  // misaligned inputs, which the delta rule's prepare kernel also reads as
  // 16-byte words.
  Expected<WgmmaMaps> maps = WgmmaMaps{};
  if (plan_.needsSm90a) {
    maps = wgmmaMaps(plan_, args);
    if (!maps.ok())
      return maps.status();
  }
  cuda::LaunchConfig config;
  config.block.x = static_cast<unsigned>(plan_.threads);
  config.stream = args.stream;
  if (!plan_.prepareKernel.empty() && chunks > 0) {
    // One CTA per (sequence, value head, chunk), all value columns at once.
    config.grid.x = static_cast<unsigned>(scanSequences * s.valueHeads);
    config.grid.y = static_cast<unsigned>(chunks);
    config.sharedMemoryBytes = plan_.prepareSharedBytes;
    LINA_RETURN_IF_ERROR(prepare_.launchWith(config, p));
  }
  config.grid.x = static_cast<unsigned>(ctas);
  config.grid.y = 1;
  config.sharedMemoryBytes = plan_.scanSharedBytes;
  if (plan_.needsSm90a) {
    LINA_RETURN_IF_ERROR(scan_.launchWith(config, p, *maps));
  } else {
    LINA_RETURN_IF_ERROR(scan_.launchWith(config, p));
  }
  if (plan_.strategy == Strategy::Materialize && chunks > 0) {
    config.grid.y = static_cast<unsigned>(chunks);
    config.sharedMemoryBytes = plan_.outputSharedBytes;
    LINA_RETURN_IF_ERROR(output_.launchWith(config, p));
  }
  if (segments > 1) {
    // A CTA a (sequence, value head), its state's elements split four ways.
    config.grid.x = static_cast<unsigned>(sequences * s.valueHeads);
    config.grid.y = 4;
    config.sharedMemoryBytes = 0;
    LINA_RETURN_IF_ERROR(combine_.launchWith(config, p, segment));
    config.grid.x = static_cast<unsigned>(scanSequences * s.valueHeads * layout.runs);
    config.grid.y = 1;
    config.sharedMemoryBytes = plan_.carrySharedBytes;
    LINA_RETURN_IF_ERROR(carry_.launchWith(config, p, segment));
  }
  return Status();
}

} // namespace lina
