//===- RunCommand.cpp - `lina run` -------------------------------------===//
//
// Part of lina. Runs a spec's chunkwise program on random inputs and reports
// its distance from the float64 reference: a user's quick way to see a spec
// work, and the passes' end-to-end check.
//
//===----------------------------------------------------------------------===//
#include "BackwardCheck.h"
#include "Commands.h"
#include "RunReport.h"
#include "ScheduleOptions.h"
#include "SpecSource.h"

#include "lina/Autotune/KernelLoader.h"
#include "lina/Autotune/ScheduleKnobs.h"
#include "lina/Autotune/TuneTiming.h"
#include "lina/Codegen/CpuExecutor.h"
#include "lina/Dialect/Lina/IR/SpecConversion.h"
#include "lina/Reference/DeviceCheck.h"
#include "lina/Reference/Reference.h"
#include "lina/Runtime/Device.h"
#include "lina/Runtime/Emulation.h"
#include "lina/Transforms/Pipeline.h"

#include <chrono>
#include <cstdio>
#include <numeric>
#include <optional>

namespace lina::cli {

namespace {

constexpr double kCpuTolerance = 1e-10;

/// A GPU run that only times (no --check) makes this many distinct tokens
/// per sequence and repeats them along T, as the tuner does: a float64
/// problem at 1 x 8192 x 96 x 128 took most of a run's ten seconds, and
/// repeated tokens make no kernel faster.
constexpr int64_t kTimingTokens = 512;

/// When this process's static objects were made: close enough to its start
/// for "time to first launch" (the dynamic loader's work comes before).
const auto processStart = std::chrono::steady_clock::now();

double msSinceStart() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - processStart)
      .count();
}

/// The process's start-up before `lina run` began, for the first-launch
/// line: a program's time to its first launch includes it, while the random
/// inputs lina run makes next are the test's, not the program's.
double startupMs = 0;

/// Loads the spec's kernel (through the cubin cache unless `useCache` is
/// off), runs it on the GPU on `problem` (rounded to the dtype first) and,
/// when `check`, compares with the float64 reference. `given` is the
/// schedule from the flags; without one the tuned or default one is used.
/// `seqLen` is the run's T: without `check` the problem may hold fewer
/// tokens, which are then repeated to T.
int runOnGpu(const Spec &spec, std::optional<ScheduleOptions> given,
             reference::Problem &problem, int64_t seqLen, bool check,
             int repeats, bool useCache, RunReport &out) {
  KernelRequest request;
  request.spec = spec;
  request.schedule = given;
  request.batch = problem.numSequences();
  request.seqLen = seqLen;
  if (spec.varlen) {
    request.seqLen = 0;
    for (size_t i = 0; i + 1 < problem.cuSeqlens.size(); ++i)
      request.seqLen = std::max<int64_t>(
          request.seqLen, problem.cuSeqlens[i + 1] - problem.cuSeqlens[i]);
  }
  LoadReport report;
  Expected<ChunkKernel> kernel =
      useCache ? loadKernel(request, &report)
               : loadKernelWithCache(request, nullptr, &report);
  if (!kernel.ok()) {
    if (kernel.status().code() == StatusCode::InvalidArgument)
      throw UsageError(kernel.message());
    throw std::runtime_error(kernel.message());
  }
  Expected<cuda::Device> device = cuda::queryDevice(0);
  if (!device.ok())
    throw std::runtime_error(device.message());
  const KernelPlan *plan = &kernel->plan();
  reference::HostInputs inputs = reference::encodeProblem(problem);
  if (!spec.varlen && seqLen > problem.seqLen) {
    // A timing-only run's tokens, repeated to T. The problem's own tensors
    // stay short; nothing reads them without --check.
    inputs =
        repeatTokens(spec, inputs, problem.batch, problem.seqLen, seqLen);
    problem.seqLen = seqLen;
  }
  Expected<reference::DeviceRun> run =
      reference::runOnDevice(*kernel, problem, inputs, 0, repeats);
  if (!run.ok())
    throw std::runtime_error(run.message());
  out.gpuDevice({*device, *plan, report, run->milliseconds, startupMs,
                 run->medianMilliseconds, repeats});
  if (!check)
    return out.timed();
  reference::Comparison c = reference::compareWithReference(problem, *run);
  if (c.referenceOverflowed)
    return out.referenceOverflowed();
  out.errors(c.outputError,
             spec.finalState ? std::optional<double>(c.stateError)
                             : std::nullopt,
             reference::tolerance(spec.dtype), /*onGpu=*/true);
  return out.verdict(c.passed);
}

} // namespace

int runCommand(const std::vector<std::string> &args) {
  startupMs = msSinceStart();
  ArgParser p("run", "<preset|file.mlir> --shape B,T,H[,HV] [options]",
              "Run the chunkwise algorithm of a spec on random inputs and "
              "compare it with the float64 reference\n(relative error of the "
              "output and of the final state).");
  addShapeOption(p);
  p.option("device", "cpu|gpu", "where to run", "cpu");
  p.flag("check", "on the GPU: compare with the float64 reference (the CPU "
                  "run always does)");
  p.flag("no-check", "on the GPU with --backward: time the kernels only, "
                     "without the float64 backward (which takes long at large "
                     "shapes)");
  p.option("varlen", "L1,L2,...",
           "pack sequences of these lengths along T (B must be 1)");
  p.option("seed", "N", "random seed", "0");
  p.flag("no-initial-state", "start every sequence from a zero state");
  p.flag("no-specialize", "skip lina-specialize (cpu)");
  p.flag("backward", "check the gradients instead: on the CPU the chunked "
                     "program's derived backward and the float64 reference "
                     "against finite differences (small shapes); on the GPU "
                     "the backward's kernels against the float64 reference");
  p.flag("json", "print the report as one JSON object (spec, shape, device, "
                 "timing, errors, pass) instead of lines");
  p.option("repeat", "N",
           "gpu: timed calls (median reported; 1 on the emulated device, "
           "LINA_EMULATE_GPU, where times mean nothing)",
           "20");
  p.flag("no-cache", "gpu: neither read nor write the cubin cache, use no "
                     "tuned schedule (as LINA_CACHE=off)");
  addScheduleOptions(p);
  addSpecOverrideOptions(p);
  if (!p.parse(args))
    return 0;
  if (p.positional().size() != 1)
    throw UsageError("expected one preset name or spec file");
  ProblemShape shape = parseShapeOption(p);
  std::string deviceName = p.get("device");
  if (deviceName != "cpu" && deviceName != "gpu")
    throw UsageError("--device must be cpu or gpu, got '" + deviceName + "'");
  bool onGpu = deviceName == "gpu";
  bool backward = p.has("backward");
  if (backward && p.has("json"))
    throw UsageError("--json reports the forward check; --backward prints "
                     "lines only");
  if (p.has("no-check") && !(backward && onGpu))
    throw UsageError("--no-check skips the GPU backward's float64 check "
                     "(add --backward --device gpu); the forward on the GPU "
                     "is not checked unless --check is given");
  if (p.has("no-check") && p.has("check"))
    throw UsageError("--check and --no-check contradict each other");
  bool check = !onGpu || p.has("check") || (backward && !p.has("no-check"));

  std::optional<BackwardScheduleOptions> backwardSchedule;
  if (backward && onGpu)
    backwardSchedule = backwardScheduleFromOptions(p);
  if (!onGpu)
    for (const char *gpuKnob :
         {"tile-v", "warps", "strategy", "segments", "barrier-window"})
      if (p.has(gpuKnob))
        throw UsageError(std::string("--") + gpuKnob +
                         " picks the GPU kernel's schedule; the CPU run "
                         "takes only --chunk-size (add --device gpu)");
  Spec spec = loadSpec(p.positional().front(), p);
  takeShapeHeads(p, shape, "lina run", spec);
  spec.initialState = !p.has("no-initial-state");
  std::vector<int64_t> cuSeqlens;
  if (p.has("varlen")) {
    std::vector<int64_t> lengths =
        parseIntList(p.get("varlen"), 0, 1 << 24, "--varlen");
    if (shape.batch != 1)
      throw UsageError("--varlen packs sequences along T: B must be 1");
    cuSeqlens.push_back(0);
    for (int64_t len : lengths)
      cuSeqlens.push_back(cuSeqlens.back() + len);
    if (cuSeqlens.back() != shape.seqLen)
      throw UsageError("--varlen lengths sum to " +
                       std::to_string(cuSeqlens.back()) + ", but T is " +
                       std::to_string(shape.seqLen));
    spec.varlen = true;
  }
  std::vector<std::string> errors = validate(spec);
  if (!errors.empty())
    throw UsageError("invalid spec: " + errors.front());
  // The CPU run keeps every tensor in float64 and replays the recurrence token
  // by token: refuse sizes that would take minutes or exhaust memory.
  double elements = double(shape.batch) * double(shape.seqLen) *
                    double(spec.valueHeads) *
                    double(std::max(spec.keyDim, spec.valueDim));
  constexpr double kMaxCpuElements = 1 << 26;
  if (check && elements > kMaxCpuElements)
    throw UsageError("--shape is too large for the float64 CPU check (" +
                     std::to_string((long long)elements) +
                     " elements per tensor, at most " +
                     std::to_string((long long)kMaxCpuElements) +
                     "): use fewer tokens or heads, or smaller --dk/--dv");

  ScheduleOptions schedule = scheduleFromOptions(p, spec);
  std::mt19937_64 rng(p.getInt("seed", 0, INT64_MAX, 0));
  // The backward's timing run keeps every token: its kernels run on the
  // problem as made, with no repetition along T.
  bool timingOnly = onGpu && !check && !spec.varlen && !backward;
  reference::Problem problem = reference::randomProblem(
      spec, shape.batch,
      timingOnly ? std::min(shape.seqLen, kTimingTokens) : shape.seqLen, rng,
      cuSeqlens);
  if (backward && !onGpu)
    checkBackwardShape(problem);
  // The emulated device runs a kernel in seconds and times nothing real:
  // one call unless asked for more.
  const int defaultRepeat = cuda::emulation::enabled() ? 1 : 20;
  RunReport out(p.has("json"));
  out.spec(spec);
  out.shape(shape, spec, cuSeqlens);
  if (backwardSchedule)
    // Timed as a forward run is (after the checked call, whose gradients
    // are kept), so that the time is there without asking.
    return runGpuBackwardCheck(problem, rng, *backwardSchedule,
                               p.getInt("repeat", 1, 100000, defaultRepeat),
                               !p.has("no-cache"), check);
  if (backward) {
    ChunkOptions chunk;
    chunk.chunkSize = schedule.chunkSize;
    chunk.specialize = !p.has("no-specialize");
    return runBackwardCheck(problem, rng, chunk);
  }
  if (onGpu) {
    // Flags change the loader's default for this shape, not the spec's
    // (lina run --chunk-size 32 keeps tv64 where the grid chose it).
    std::optional<ScheduleOptions> given;
    if (scheduleFlagGiven(p))
      given = applyScheduleFlags(
          p, shapeDefaultSchedule(spec, problem.numSequences(), 0,
                                  shape.seqLen),
          spec);
    return runOnGpu(spec, given, problem, shape.seqLen, check,
                    p.getInt("repeat", 1, 100000, defaultRepeat),
                    !p.has("no-cache"), out);
  }

  ChunkOptions options;
  options.chunkSize = schedule.chunkSize;
  options.specialize = !p.has("no-specialize");
  mlir::MLIRContext ctx;
  std::string error;
  auto module = buildChunkedProgram(ctx, spec, options, error);
  if (!module)
    throw UsageError(error);
  ChunkedOp program = *module->getOps<ChunkedOp>().begin();

  reference::Result expected = reference::runRecurrent(problem);
  if (!reference::isFinite(expected))
    return out.referenceOverflowed();
  reference::Result actual;
  if (!executeChunked(program, problem, actual, error)) {
    std::fprintf(stderr, "lina run: error: %s\n", error.c_str());
    return 1;
  }
  double errOut = reference::relativeError(actual.o, expected.o);
  double errState =
      spec.finalState
          ? reference::relativeError(actual.finalState, expected.finalState)
          : 0.0;
  bool pass = errOut <= kCpuTolerance && errState <= kCpuTolerance;
  // The update the program computes, after lina-specialize.
  out.cpuDevice(options.chunkSize, toSpec(program.getSpec()).update);
  out.errors(errOut,
             spec.finalState ? std::optional<double>(errState) : std::nullopt,
             kCpuTolerance, /*onGpu=*/false);
  return out.verdict(pass);
}

} // namespace lina::cli
