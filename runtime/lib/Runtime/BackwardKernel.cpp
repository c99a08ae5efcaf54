//===- BackwardKernel.cpp - Launching generated backward kernels --------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "LaunchParams.h"
#include "lina/Runtime/BackwardKernel.h"
#include "lina/Runtime/BackwardChecks.h"
#include "lina/Runtime/Device.h"
#include "lina/Runtime/ForwardChecks.h"
#include "lina/Runtime/Nvrtc.h"
#include "lina/Runtime/WorkspaceLayout.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace lina {

namespace {

/// Same layout as lina::GradParams in the device library (Backward.cuh).
struct GradLaunchParams {
  const void *dO;
  const float *dht;
  float *dq, *dk, *dv, *dg, *dbeta, *da, *db;
  float *dGateALog, *dGateDtBias, *dh0;
  float *spill;
  float *chunkGrads;
};
static_assert(sizeof(GradLaunchParams) == 14 * 8,
              "GradLaunchParams must match lina::GradParams in Backward.cuh");

Status invalid(const std::string &message) {
  return Status::error(StatusCode::InvalidArgument, message);
}

} // namespace

Expected<std::string> compileBackwardPlan(const BackwardPlan &plan,
                                          const std::string &arch) {
  const cuda::Nvrtc &nvrtc = cuda::Nvrtc::get();
  if (!nvrtc.available())
    return nvrtc.status();
  Expected<cuda::CompiledKernel> compiled =
      nvrtc.compile(plan.source, kernelCompileOptions(arch));
  if (!compiled.ok())
    return compiled.status();
  return std::move(compiled->cubin);
}

namespace {

/// The call's tensors as byte ranges, for a lent workspace to stay apart
/// from: the inputs, dO in o's place and dFinalState in the final state's
/// (as checkBackwardArgs sees them), and the gradients.
std::vector<TensorBytes> backwardTensors(const Spec &spec,
                                         const BackwardArgs &args) {
  ForwardArgs inputs = args.forward;
  inputs.o = const_cast<void *>(args.dO);
  inputs.finalState = const_cast<float *>(args.dFinalState);
  std::vector<TensorBytes> out;
  for (const TensorExtent &e : tensorExtents(spec, inputs)) {
    std::string name = e.name;
    out.push_back({name == "o"            ? "dO"
                   : name == "finalState" ? "dFinalState"
                                          : e.name,
                   e.pointer, e.bytes});
  }
  for (const GradientExtent &g : gradientExtents(spec, args))
    if (g.pointer)
      out.push_back({g.name, g.pointer, g.elements * 4});
  return out;
}

/// A plan whose kernels cannot run on `device`: InvalidArgument naming why.
Status checkDevice(const BackwardPlan &plan, const cuda::Device &device) {
  unsigned shared = plan.sharedBytes();
  if (shared > static_cast<unsigned>(device.sharedMemoryPerBlockOptin))
    return invalid("the backward needs " + std::to_string(shared) +
                   " bytes of shared memory a CTA; " + device.name +
                   " allows " +
                   std::to_string(device.sharedMemoryPerBlockOptin) +
                   ": use a smaller chunk size or tile-v");
  return Status();
}

} // namespace

Expected<BackwardKernel> BackwardKernel::load(const BackwardPlan &plan,
                                              int ordinal) {
  Expected<cuda::Device> device = cuda::queryDevice(ordinal);
  if (!device.ok())
    return device.status();
  // Before compiling: a kernel that cannot launch here is not worth NVRTC's
  // time.
  LINA_RETURN_IF_ERROR(checkDevice(plan, *device));
  Expected<std::string> cubin = compileBackwardPlan(plan, device->arch);
  if (!cubin.ok())
    return cubin.status();
  return fromCubin(plan, *cubin, ordinal);
}

Expected<BackwardKernel> BackwardKernel::fromCubin(const BackwardPlan &plan,
                                                   const std::string &cubin,
                                                   int ordinal) {
  Expected<cuda::Device> device = cuda::queryDevice(ordinal);
  if (!device.ok())
    return device.status();
  LINA_RETURN_IF_ERROR(checkDevice(plan, *device));
  Expected<cuda::Module> module = cuda::Module::load(ordinal, cubin);
  if (!module.ok())
    return module.status();
  BackwardKernel kernel;
  kernel.plan_ = plan;
  kernel.ordinal_ = ordinal;
  kernel.module_ = std::make_shared<cuda::Module>(std::move(*module));
  for (auto [name, handle] :
       {std::pair{&plan.scansKernel, &kernel.scans_},
        std::pair{&plan.backwardKernel, &kernel.backward_},
        std::pair{&plan.zeroKernel, &kernel.zero_}}) {
    Expected<cuda::Kernel> function = kernel.module_->kernel(*name);
    if (!function.ok())
      return function.status();
    *handle = *function;
  }
  for (const BackwardPlan::Prepare &prepare : plan.prepares) {
    Expected<cuda::Kernel> function = kernel.module_->kernel(prepare.kernel);
    if (!function.ok())
      return function.status();
    kernel.prepares_.push_back(*function);
  }
  kernel.workspace_ = std::make_shared<OwnWorkspace>();
  return kernel;
}

Expected<size_t>
BackwardKernel::workspaceBytes(const ForwardArgs &args) const {
  Expected<BackwardWorkspaceLayout> layout =
      backwardWorkspaceLayout(plan_, shapeOf(args));
  if (!layout.ok())
    return layout.status();
  return layout->bytes;
}

Status BackwardKernel::backward(const BackwardArgs &args) const {
  LINA_RETURN_IF_ERROR(checkBackwardArgs(plan_, args));
  Expected<BackwardWorkspaceLayout> layout =
      backwardWorkspaceLayout(plan_, shapeOf(args.forward));
  if (!layout.ok())
    return layout.status();
  // Shared by every call on this kernel: held until the launches are
  // queued; calls on other streams lend their own (backward(args, ws)).
  std::lock_guard<std::mutex> lock(workspace_->mutex);
  if (workspace_->buffer.size() < layout->bytes) {
    workspace_->buffer = cuda::DeviceBuffer();
    Expected<cuda::DeviceBuffer> buffer =
        cuda::DeviceBuffer::allocate(ordinal_, layout->bytes);
    if (!buffer.ok())
      return buffer.status();
    workspace_->buffer = std::move(*buffer);
  }
  return launch(args, reinterpret_cast<char *>(workspace_->buffer.pointer()),
                *layout);
}

Status BackwardKernel::backward(const BackwardArgs &args,
                                const Workspace &workspace) const {
  LINA_RETURN_IF_ERROR(checkBackwardArgs(plan_, args));
  Expected<BackwardWorkspaceLayout> layout =
      backwardWorkspaceLayout(plan_, shapeOf(args.forward));
  if (!layout.ok())
    return layout.status();
  LINA_RETURN_IF_ERROR(checkWorkspace(layout->bytes, workspace));
  LINA_RETURN_IF_ERROR(checkWorkspaceApart(layout->bytes, workspace,
                                           backwardTensors(plan_.spec, args)));
  return launch(args, static_cast<char *>(workspace.pointer), *layout);
}

Status BackwardKernel::launch(const BackwardArgs &args, char *base,
                              const BackwardWorkspaceLayout &layout) const {
  const ForwardArgs &f = args.forward;
  const Spec &s = plan_.spec;
  int64_t sequences = s.varlen ? f.numSequences : f.batch;
  int64_t ctas = layout.ctas;

  cuda::LaunchConfig config;
  config.stream = f.stream;
  // Zero the gradients: the backward adds every chunk's share to them.
  for (const GradientExtent &g : gradientExtents(s, args)) {
    if (!g.pointer)
      continue;
    long long count = static_cast<long long>(g.elements);
    float *pointer = g.pointer;
    config.block.x = 256;
    config.grid.x = static_cast<unsigned>(
        std::clamp<long long>((count + 255) / 256, 1, 4096));
    config.grid.y = 1;
    config.sharedMemoryBytes = 0;
    LINA_RETURN_IF_ERROR(zero_.launchWith(config, pointer, count));
  }

  // The prepare kernels' records follow the states and their gradients.
  float *records = plan_.recordFloats > 0
                       ? reinterpret_cast<float *>(base + layout.stateBytes +
                                                   layout.gradBytes)
                       : nullptr;
  LaunchParams p{f.q,         f.k,          f.v,
                 f.g,         f.beta,       f.a,
                 f.b,         f.gateALog,   f.gateDtBias,
                 nullptr,     f.initialState, nullptr,
                 f.cuSeqlens, reinterpret_cast<float *>(base), records,
                 f.batch,     f.seqLen,     sequences,
                 f.seqLen,    1};
  GradLaunchParams d{args.dO,
                     args.dFinalState,
                     args.dq,
                     args.dk,
                     args.dv,
                     args.dg,
                     args.dBeta,
                     args.da,
                     args.db,
                     args.dGateALog,
                     args.dGateDtBias,
                     args.dInitialState,
                     plan_.spillFloats > 0
                         ? reinterpret_cast<float *>(base + layout.stateBytes +
                                                     layout.gradBytes +
                                                     layout.recordBytes)
                         : nullptr,
                     reinterpret_cast<float *>(base + layout.stateBytes)};
  if (ctas == 0)
    return Status();
  config.block.x = static_cast<unsigned>(plan_.threads);
  // What the scans load, a CTA per (sequence, value head, chunk); packed
  // sequences take as many rows as the whole pack has chunks.
  for (size_t i = 0; i < prepares_.size(); ++i) {
    const BackwardPlan::Prepare &prepare = plan_.prepares[i];
    config.grid.x = static_cast<unsigned>(sequences * s.valueHeads);
    config.grid.y = static_cast<unsigned>((f.seqLen + plan_.chunkSize - 1) /
                                          plan_.chunkSize);
    config.sharedMemoryBytes = prepare.sharedBytes;
    LINA_RETURN_IF_ERROR(prepare.gradParams
                             ? prepares_[i].launchWith(config, p, d)
                             : prepares_[i].launchWith(config, p));
  }
  // The two scans side by side: a CTA of each per (sequence, value head,
  // value tile).
  config.grid.x = static_cast<unsigned>(2 * ctas);
  config.grid.y = 1;
  config.sharedMemoryBytes = plan_.scansSharedBytes();
  LINA_RETURN_IF_ERROR(scans_.launchWith(config, p, d));
  config.grid.x = static_cast<unsigned>(ctas);
  config.grid.y = static_cast<unsigned>(layout.chunkRows);
  config.sharedMemoryBytes = plan_.backwardSharedBytes;
  return backward_.launchWith(config, p, d);
}

} // namespace lina
