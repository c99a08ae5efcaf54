//===- TuneCommand.cpp - `lina tune` ----------------------------------===//
//
// Part of lina. Sweeps the schedule space for a spec at a shape: every
// viable candidate is compiled, checked against the float64 reference on a
// small problem (a wrong candidate may never win), then timed at the shape.
// `--dry-run` lists the space and what pruning removed, without a GPU.
//
//===----------------------------------------------------------------------===//
#include "Commands.h"
#include "SpecSource.h"

#include "lina/Autotune/SearchSpace.h"
#include "lina/Reference/DeviceCheck.h"
#include "lina/Reference/Reference.h"
#include "lina/Runtime/Device.h"

#include <cstdio>
#include <limits>

namespace lina::cli {

namespace {

struct Timed {
  ScheduleOptions schedule;
  std::string status; ///< "ok" or what went wrong
  double ms = std::numeric_limits<double>::infinity();
};

/// Compiles, checks on a small problem against the reference, and times one
/// candidate at the tuned shape.
Timed tryCandidate(const Spec &spec, const ScheduleOptions &schedule,
                   int64_t batch, int64_t seqLen, int repeats) {
  Timed t{schedule, "", std::numeric_limits<double>::infinity()};
  Expected<KernelPlan> plan = planChunkKernel(spec, schedule);
  if (!plan.ok())
    return t.status = "plan: " + plan.message(), t;
  Expected<ChunkKernel> kernel = ChunkKernel::load(*plan, 0);
  if (!kernel.ok())
    return t.status = "compile: " + kernel.message(), t;
  // Correctness first, on a size the float64 reference replays quickly.
  std::mt19937_64 rng(7);
  reference::Problem small =
      reference::randomProblem(spec, 1, 3 * schedule.chunkSize + 5, rng);
  reference::HostInputs smallInputs = reference::encodeProblem(small);
  Expected<reference::DeviceRun> checked =
      reference::runOnDevice(*kernel, small, smallInputs, 0);
  if (!checked.ok())
    return t.status = "launch: " + checked.message(), t;
  reference::Comparison c = reference::compareWithReference(small, *checked);
  if (!c.passed)
    return t.status = "mismatch: relative error " +
                      std::to_string(std::max(c.outputError, c.stateError)),
           t;
  reference::Problem full = reference::randomProblem(spec, batch, seqLen, rng);
  reference::HostInputs fullInputs = reference::encodeProblem(full);
  Expected<reference::DeviceRun> timed =
      reference::runOnDevice(*kernel, full, fullInputs, 0, repeats);
  if (!timed.ok())
    return t.status = "launch: " + timed.message(), t;
  t.ms = timed->medianMilliseconds;
  t.status = "ok";
  return t;
}

} // namespace

int tuneCommand(const std::vector<std::string> &args) {
  ArgParser p("tune", "<preset|file.mlir> --shape B,T,H[,HV] [options]",
              "Find the fastest schedule for a spec at a shape on this GPU: "
              "every candidate that\nsurvives pruning is compiled, checked "
              "against the float64 reference, and timed.");
  addShapeOption(p);
  p.flag("dry-run", "list the candidate space and the pruning; no GPU needed");
  p.option("repeat", "N", "timed calls per candidate (median)", "10");
  addSpecOverrideOptions(p);
  if (!p.parse(args))
    return 0;
  if (p.positional().size() != 1)
    throw UsageError("expected one preset name or spec file");
  ProblemShape shape = parseShapeOption(p);
  Spec spec = loadSpec(p.positional().front(), p);
  spec.heads = shape.heads;
  spec.valueHeads = shape.valueHeads;
  std::vector<std::string> errors = validate(spec);
  if (!errors.empty())
    throw UsageError("invalid spec: " + errors.front());

  DeviceLimits limits;
  bool dryRun = p.has("dry-run");
  Expected<cuda::Device> device = cuda::queryDevice(0);
  if (device.ok()) {
    limits.sharedMemoryPerBlockOptin = device->sharedMemoryPerBlockOptin;
    limits.smCount = device->smCount;
  } else if (!dryRun) {
    throw std::runtime_error(device.message() +
                             " ('lina tune --dry-run' lists the candidates "
                             "without a GPU)");
  }
  std::vector<SpaceCandidate> space = enumerateCandidates(spec, limits);
  size_t viable = 0;
  for (const SpaceCandidate &c : space)
    viable += c.viable();
  std::printf("%s at B=%lld T=%lld H=%lld HV=%lld: %zu candidates, %zu "
              "viable (limits: %lld bytes of shared memory%s)\n",
              spec.name.c_str(), (long long)shape.batch,
              (long long)shape.seqLen, (long long)spec.heads,
              (long long)spec.valueHeads, space.size(), viable,
              (long long)limits.sharedMemoryPerBlockOptin,
              device.ok() ? (", " + device->name).c_str() : ", assumed H200");
  if (dryRun) {
    for (const SpaceCandidate &c : space)
      std::printf("  %-26s %8lld B  %s\n", describe(c.schedule).c_str(),
                  (long long)c.sharedBytes,
                  c.viable() ? "viable" : ("pruned: " + c.pruned).c_str());
    return 0;
  }

  int repeats = static_cast<int>(p.getInt("repeat", 1, 1000, 10));
  Timed best;
  size_t index = 0;
  for (const SpaceCandidate &c : space) {
    if (!c.viable())
      continue;
    Timed t =
        tryCandidate(spec, c.schedule, shape.batch, shape.seqLen, repeats);
    if (t.status == "ok" && t.ms < best.ms)
      best = t;
    ++index;
    std::fprintf(stderr, "[%zu/%zu] %-26s %s  (best %s %.3f ms)\n", index,
                 viable, describe(c.schedule).c_str(),
                 t.status == "ok" ? (std::to_string(t.ms) + " ms").c_str()
                                  : t.status.substr(0, 60).c_str(),
                 describe(best.schedule).c_str(), best.ms);
  }
  if (best.status != "ok")
    throw std::runtime_error("no candidate compiled, matched the reference "
                             "and ran");
  std::printf("best: %s, %.3f ms (median of %d)\n",
              describe(best.schedule).c_str(), best.ms, repeats);
  return 0;
}

} // namespace lina::cli
