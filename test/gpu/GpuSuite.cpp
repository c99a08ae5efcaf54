//===- GpuSuite.cpp - Generated kernels against the float64 reference -----===//
//
// Part of lina. `lina-gpu-suite`: the end-to-end check of the CUDA back end on
// a real GPU. Every case plans a kernel for a preset (lina-specialize ->
// lina-chunk -> lina-schedule -> CUDA C++), compiles it with NVRTC, runs it on
// random inputs and compares its output and final state with the float64
// recurrence computed on exactly the same (dtype-rounded) inputs.
//
// Not a gtest binary on purpose: it has to run where only a GPU, a driver and
// NVRTC are guaranteed, report one line per case as results come in, share
// compiled kernels between cases and spread the reference over the CPU cores.
//
// Exit status: 0 every case passed, 1 a case failed, 2 a usage error, 77 no
// GPU here (no driver, no device or no NVRTC), like automake's "skipped".
//
//===----------------------------------------------------------------------===//
#include "Suite.h"
#include "SuiteLarge.h"
#include "WorkPool.h"
#include "lina/Runtime/Emulation.h"

#include <algorithm>
#include <csignal>
#include <unistd.h>

using namespace lina;
using namespace lina::gpusuite;

namespace {

//===----------------------------------------------------------------------===//
// Kernels, compiled once per key
//===----------------------------------------------------------------------===//

struct LoadedKernel {
  std::optional<ChunkKernel> kernel;
  std::string error;  ///< why there is no kernel
  double seconds = 0; ///< planning, NVRTC and loading
};
using KernelFuture = std::shared_future<std::shared_ptr<const LoadedKernel>>;

/// Plans and compiles a kernel on a worker thread. Planning runs the MLIR
/// pipeline, which CudaEmitter.h does not promise is thread-safe, so plans
/// are made one at a time; NVRTC (documented thread-safe) and module loading
/// (the driver is) run in parallel, and they are the expensive part.
std::shared_ptr<const LoadedKernel>
compileKernel(const Case &c, int device, const std::atomic<bool> &cancelled) {
  static std::mutex planMutex;
  auto loaded = std::make_shared<LoadedKernel>();
  if (cancelled) {
    loaded->error = "not compiled: the run was stopped";
    return loaded;
  }
  Spec spec = caseSpec(c);
  std::optional<Expected<KernelPlan>> plan;
  double start;
  {
    std::lock_guard<std::mutex> lock(planMutex);
    start = now(); // the wait for the lock is not this kernel's cost
    ScheduleOptions schedule = defaultSchedule(spec);
    schedule.strategy = c.strategy;
    schedule.prefetch = c.prefetch;
    schedule.sharedState = c.sharedState;
    schedule.directDecay = c.directDecay;
    schedule.twoCTAs = c.twoCTAs;
    if (c.warpgroup)
      schedule = withWarpgroup(schedule);
    if (c.segments)
      schedule.segments = c.segments;
    if (c.tileV) {
      schedule.tileV = c.tileV;
      schedule.warps = c.warps;
    }
    plan.emplace(planChunkKernel(spec, schedule));
  }
  if (!plan->ok()) {
    loaded->error = "planChunkKernel: " + plan->message();
  } else {
    Expected<ChunkKernel> kernel = ChunkKernel::load(plan->value(), device);
    if (kernel.ok())
      loaded->kernel.emplace(std::move(kernel).value());
    else
      loaded->error = std::string("ChunkKernel::load (") +
                      statusCodeName(kernel.status().code()) +
                      "): " + kernel.message();
  }
  loaded->seconds = now() - start;
  return loaded;
}

/// Starts a compile for every distinct kernel the cases need, in case order,
/// so the GPU loop can begin as soon as the first ones are ready.
std::map<std::string, KernelFuture>
startCompiles(const std::vector<Case> &cases, WorkPool &pool, int device,
              const std::atomic<bool> &cancelled) {
  std::map<std::string, KernelFuture> kernels;
  for (const Case &c : cases) {
    std::string key = kernelKey(c);
    if (kernels.count(key))
      continue;
    auto promise =
        std::make_shared<std::promise<std::shared_ptr<const LoadedKernel>>>();
    kernels.emplace(key, promise->get_future().share());
    pool.submit(
        [promise, c, device, &cancelled] {
          promise->set_value(compileKernel(c, device, cancelled));
        },
        /*urgent=*/false);
  }
  return kernels;
}

/// Draws the case's random problem and rounds it in place to what the
/// device gets.
reference::Problem makeProblem(const Case &c, uint64_t seedBase,
                               HostInputs &inputs) {
  std::vector<int64_t> cuSeqlens;
  if (!c.lengths.empty()) {
    cuSeqlens.push_back(0);
    for (int64_t length : c.lengths)
      cuSeqlens.push_back(cuSeqlens.back() + length);
  }
  std::mt19937_64 rng(caseSeed(c.name, seedBase));
  reference::Problem p =
      reference::randomProblem(caseSpec(c), c.batch, c.seqLen, rng, cuSeqlens);
  if (c.gateScale != 1 && p.gateALog.empty())
    for (double &g : p.g)
      g *= c.gateScale;
  inputs = reference::encodeProblem(p);
  return p;
}

/// A case's inputs, made on a worker thread ahead of its launch: drawing
/// and rounding them costs almost as much CPU as the reference.
struct Prepared {
  HostInputs inputs;
  std::shared_ptr<const reference::Problem> problem;
  std::string error; ///< checkShapes' complaint: a bug in the suite
};

std::shared_ptr<const Prepared> prepare(const Case &c, uint64_t seedBase) {
  auto prepared = std::make_shared<Prepared>();
  auto problem = std::make_shared<reference::Problem>(
      makeProblem(c, seedBase, prepared->inputs));
  prepared->error = reference::checkShapes(*problem);
  prepared->problem = std::move(problem);
  return prepared;
}

//===----------------------------------------------------------------------===//
// The run
//===----------------------------------------------------------------------===//

/// The case whose kernel is on the GPU, for onSignal: a kernel that never
/// finishes leaves the suite waiting in synchronize until `timeout` stops it,
/// and the log should then say which case hung. An atomic pointer is
/// lock-free, so the handler may read it.
std::atomic<const char *> runningCase{nullptr};

extern "C" void onSignal(int signal) {
  // `timeout` signals the process and its group, so two threads can get
  // here; the first one reports and exits.
  static std::atomic<bool> reported{false};
  if (reported.exchange(true))
    return;
  // Only async-signal-safe calls here: write and _exit.
  auto say = [](const char *text) {
    ssize_t ignored = ::write(STDOUT_FILENO, text, std::strlen(text));
    (void)ignored;
  };
  say("\nlina-gpu-suite: stopped by a signal");
  if (const char *name = runningCase.load()) {
    say(" while running ");
    say(name);
  }
  say("\nresult  FAIL\n");
  ::_exit(128 + signal);
}

/// Why the suite cannot run here, or "" when a GPU, a driver and NVRTC are
/// present.
std::string whyNoGpu(int device) {
  if (!cuda::Driver::get().available())
    return cuda::Driver::get().status().message();
  Expected<int> count = cuda::deviceCount();
  if (!count.ok())
    return count.message();
  if (*count <= device)
    return "the driver sees " + std::to_string(*count) + " GPU(s); GPU " +
           std::to_string(device) + " was asked for";
  if (!cuda::Nvrtc::get().available())
    return cuda::Nvrtc::get().status().message();
  return "";
}

/// A kernel fault (illegal address, ...) leaves the context unusable, and
/// every later call repeats its error; an ordinary error is reported once.
/// So a second synchronize that still fails means nothing more can run.
bool contextIsLost(int device) { return !cuda::synchronizeDevice(device).ok(); }

/// What the compiles cost, for the summary.
struct CompileStats {
  size_t kernels = 0, failed = 0;
  double seconds = 0; ///< summed over kernels (they overlap in time)
};

/// Runs every case: the GPU work in case order on the calling thread (whose
/// context the launches use); compiles, inputs and reference checks on the
/// pool.
class SuiteRun {
public:
  SuiteRun(const std::vector<Case> &cases, const Options &options,
           Results &results)
      : cases_(cases), options_(options), results_(results) {}

  CompileStats run() {
    {
      WorkPool pool(options_.threads);
      pool_ = &pool;
      kernels_ = startCompiles(cases_, pool, options_.device, cancelled_);
      prepared_.resize(cases_.size());
      for (size_t i = 0; i < cases_.size(); ++i) {
        if (lostContext_.empty())
          prepareAhead(i);
        runCase(i);
      }
      results_.waitForAll();
      pool_ = nullptr;
    } // joins the pool: every compile has finished
    CompileStats stats;
    for (const auto &[key, future] : kernels_) {
      ++stats.kernels;
      stats.failed += !future.get()->kernel;
      stats.seconds += future.get()->seconds;
    }
    return stats;
  }

private:
  void runCase(size_t index) {
    const Case &c = cases_[index];
    // Taken out of the vector so that the inputs are freed whichever way
    // this case ends.
    std::future<std::shared_ptr<const Prepared>> inputs =
        std::move(prepared_[index]);
    CaseResult result;
    result.seed = caseSeed(c.name, options_.seed);
    if (!lostContext_.empty())
      return fail(index, std::move(result), "not run: " + lostContext_);
    const std::string key = kernelKey(c);
    std::shared_ptr<const LoadedKernel> loaded = kernels_.at(key).get();
    result.compileSeconds = loaded->seconds;
    if (!loaded->kernel) {
      // Every case of this kernel fails; NVRTC's log and the numbered source
      // are printed with the first one only.
      bool first = reportedKernels_.insert(key).second;
      return fail(index, std::move(result),
                  first ? loaded->error
                        : "kernel " + key + " did not compile (see above)");
    }
    std::shared_ptr<const Prepared> prepared = inputs.get();
    if (!prepared->error.empty())
      return fail(index, std::move(result),
                  "internal: the suite built a bad problem: " +
                      prepared->error);

    runningCase = c.name.c_str();
    Expected<DeviceRun> run =
        runOnDevice(*loaded->kernel, *prepared->problem, prepared->inputs,
                    options_.device, /*timedRepeats=*/0, c.misaligned);
    runningCase = nullptr;
    if (!run.ok()) {
      if (contextIsLost(options_.device)) {
        lostContext_ = "the CUDA context was lost in " + c.name +
                       " (rerun the others with --filter)";
        cancelled_ = true;
      }
      return fail(index, std::move(result), run.message());
    }
    result.gpuMilliseconds = run->milliseconds;
    submitCheck(index, std::move(result), prepared->problem,
                std::make_shared<DeviceRun>(std::move(run).value()));
  }

  /// Keeps the inputs of the next cases being made on the pool, as many as
  /// there are threads: enough that the GPU loop never waits for them, few
  /// enough that they do not fill the memory.
  void prepareAhead(size_t index) {
    const size_t end =
        std::min(cases_.size(), index + 1 + size_t(options_.threads));
    for (; nextToPrepare_ < end; ++nextToPrepare_) {
      auto promise =
          std::make_shared<std::promise<std::shared_ptr<const Prepared>>>();
      prepared_[nextToPrepare_] = promise->get_future();
      const Case &c = cases_[nextToPrepare_];
      uint64_t seed = options_.seed;
      pool_->submit(
          [promise, &c, seed] { promise->set_value(prepare(c, seed)); },
          /*urgent=*/true);
    }
  }

  void fail(size_t index, CaseResult result, std::string message) {
    result.message = std::move(message);
    results_.record(index, std::move(result));
  }

  /// Queues the reference check, first waiting while enough are queued to
  /// keep every thread busy: more would only hold problems in memory.
  void submitCheck(size_t index, CaseResult result,
                   std::shared_ptr<const reference::Problem> problem,
                   std::shared_ptr<const DeviceRun> device) {
    results_.waitForRoom(2 * size_t(options_.threads));
    results_.referenceStarted();
    Results &results = results_;
    pool_->submit(
        [&results, index, problem, device, result] {
          results.referenceFinished(
              index, checkAgainstReference(*problem, *device, result));
        },
        /*urgent=*/true);
  }

  const std::vector<Case> &cases_;
  const Options &options_;
  Results &results_;
  WorkPool *pool_ = nullptr;
  /// Read by the pool's threads, so it outlives the pool.
  std::atomic<bool> cancelled_{false};
  std::map<std::string, KernelFuture> kernels_;
  std::vector<std::future<std::shared_ptr<const Prepared>>> prepared_;
  size_t nextToPrepare_ = 0;
  std::set<std::string> reportedKernels_;
  std::string lostContext_;
};

int printSummary(const std::vector<Case> &cases, const Results &results,
                 const CompileStats &compiles, const cuda::Device &device,
                 double wallSeconds, const std::string &jsonPath) {
  const std::vector<CaseResult> &all = results.all();
  printSummaryTable(cases, all);
  size_t passed = 0;
  bool firstFailure = true;
  for (size_t i = 0; i < cases.size(); ++i) {
    passed += all[i].passed;
    if (all[i].passed)
      continue;
    // Repeated here so that failures are not lost in a long log.
    std::string why = all[i].compared
                          ? "out " + formatError(all[i].outputError) +
                                ", state " + formatError(all[i].stateError)
                          : firstLine(all[i].message, 160);
    std::printf("%sFAILED %s: %s\n", firstFailure ? "\n" : "",
                cases[i].name.c_str(), why.c_str());
    firstFailure = false;
  }
  std::printf("\nGPU     %s (%s, %d SMs, driver %d.%d)\n", device.name.c_str(),
              device.arch.c_str(), device.smCount, device.driverVersion / 1000,
              device.driverVersion % 1000 / 10);
  std::printf("kernels %zu compiled, %zu failed, %.1f s of compile time\n",
              compiles.kernels - compiles.failed, compiles.failed,
              compiles.seconds);
  std::printf("cases   %zu passed, %zu failed, %zu total in %.1f s\n", passed,
              cases.size() - passed, cases.size(), wallSeconds);
  if (!jsonPath.empty()) {
    if (writeJson(jsonPath, device, cases, all))
      std::printf("json    %s\n", jsonPath.c_str());
    else
      std::printf("json    could not write %s\n", jsonPath.c_str());
  }
  std::printf("result  %s\n", passed == cases.size() ? "PASS" : "FAIL");
  return passed == cases.size() ? kExitPass : kExitFail;
}

/// --self-test: what can be checked without a GPU, so CI checks it: the
/// 16-bit conversions, unique case names, and that every case's spec is
/// valid and its problem has the shapes the kernel will be told.
int selfTest() {
  std::string why;
  if (!conversionsAreExact(why)) {
    std::printf("self-test FAILED: %s\n", why.c_str());
    return kExitFail;
  }
  std::vector<Case> cases = allCases();
  for (Case &c : tinyCases())
    cases.push_back(std::move(c));
  std::set<std::string> names;
  for (const Case &c : cases) {
    if (!names.insert(c.name).second)
      why = "two cases are named " + c.name;
    else if (std::vector<std::string> errors = validate(caseSpec(c));
             !errors.empty())
      why = c.name + ": " + errors.front();
    // One problem per preset and shape is enough to check the shapes.
    else if ((c.dim == 64 && c.dtype == DType::F32 &&
              c.strategy == Strategy::FusedScan) ||
             !c.lengths.empty()) {
      HostInputs inputs;
      if (std::string error = reference::checkShapes(makeProblem(c, 0, inputs));
          !error.empty())
        why = c.name + ": " + error;
    }
    if (!why.empty()) {
      std::printf("self-test FAILED: %s\n", why.c_str());
      return kExitFail;
    }
  }
  if (std::string error = largeSelfTest(); !error.empty()) {
    std::printf("self-test FAILED: --large: %s\n", error.c_str());
    return kExitFail;
  }
  std::printf("self-test passed: conversions exact, %zu cases valid, the "
              "--large reference reads the device's inputs\n",
              cases.size());
  return kExitPass;
}

} // namespace

int main(int argc, char **argv) {
  Options options;
  if (int status = parseOptions(argc, argv, options); status >= 0)
    return status;
  if (options.selfTest)
    return selfTest();
  if (options.large) {
    std::signal(SIGTERM, onSignal);
    std::signal(SIGINT, onSignal);
    return runLarge(options, whyNoGpu(options.device), runningCase);
  }
  std::vector<Case> cases = selectCases(options);
  if (cases.empty()) {
    std::fprintf(stderr, "lina-gpu-suite: no case matches --filter '%s'\n",
                 options.filter.c_str());
    return kExitUsage;
  }
  if (options.list) {
    double flops = 0;
    for (const Case &c : cases) {
      std::printf("%s\n", c.name.c_str());
      flops += referenceFlops(c);
    }
    std::printf("%zu cases, reference ~%.1f GFLOP\n", cases.size(),
                flops * 1e-9);
    return kExitPass;
  }
  std::string why;
  if (!conversionsAreExact(why)) {
    std::fprintf(stderr, "lina-gpu-suite: internal: %s\n", why.c_str());
    return kExitFail;
  }
  if (std::string reason = whyNoGpu(options.device); !reason.empty()) {
    std::printf("SKIP: no GPU to run on: %s\n", reason.c_str());
    return kExitSkip;
  }
  Expected<cuda::Device> device = cuda::queryDevice(options.device);
  if (!device.ok()) {
    std::printf("FAIL: cannot describe GPU %d: %s\n", options.device,
                device.message().c_str());
    return kExitFail;
  }
  std::printf("lina-gpu-suite: %zu cases on %s (%s), %u CPU threads\n",
              cases.size(), device->name.c_str(), device->arch.c_str(),
              options.threads);
  std::fflush(stdout);

  std::signal(SIGTERM, onSignal);
  std::signal(SIGINT, onSignal);
  double start = now();
  Results results(cases);
  CompileStats compiles = SuiteRun(cases, options, results).run();
  return printSummary(cases, results, compiles, *device, now() - start,
                      options.jsonPath);
}
