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
#include "lina/Codegen/KernelPlanner.h"
#include "lina/Reference/DeviceCheck.h"
#include "lina/Reference/Problem.h"
#include "lina/Reference/Reference.h"
#include "lina/Runtime/ChunkKernel.h"
#include "lina/Runtime/Device.h"
#include "lina/Runtime/Driver.h"
#include "lina/Runtime/Memory.h"
#include "lina/Runtime/Nvrtc.h"
#include "lina/Runtime/Status.h"
#include "lina/Spec/Presets.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

using namespace lina;
using reference::DeviceRun;
using reference::HostInputs;
using reference::tolerance;
using reference::conversionsAreExact;

namespace {

constexpr int kExitPass = 0;
constexpr int kExitFail = 1;
constexpr int kExitUsage = 2;
constexpr int kExitSkip = 77;


/// Seconds on a monotonic clock since some fixed point.
double now() {
  using Clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

//===----------------------------------------------------------------------===//
// The case matrix
//===----------------------------------------------------------------------===//

/// One kernel run: a preset at a size, with a schedule strategy and dtype.
struct Case {
  std::string preset;
  Strategy strategy = Strategy::FusedScan;
  DType dtype = DType::BF16;
  int64_t dim = 64; ///< K = V
  int64_t batch = 1, seqLen = 0, heads = 1, valueHeads = 1;
  /// Varlen: the packed sequences' lengths (batch 1); empty otherwise.
  std::vector<int64_t> lengths;
  bool initialState = true;
  bool quick = false; ///< part of the --quick subset
  std::string name;
};

const char *strategyName(Strategy strategy) {
  return strategy == Strategy::FusedScan ? "fused" : "materialize";
}

/// "gdn/fused/bf16/d128/B2.T1000.H2.HV2/init". Slashes separate the parts so
/// that --filter can pick any of them ("/f32/", "varlen", "gdn/fused").
std::string caseName(const Case &c) {
  std::string shape = c.lengths.empty()
                          ? "B" + std::to_string(c.batch)
                          : "varlen" + std::to_string(c.lengths.size());
  shape += ".T" + std::to_string(c.seqLen) + ".H" + std::to_string(c.heads) +
           ".HV" + std::to_string(c.valueHeads);
  return c.preset + "/" + strategyName(c.strategy) + "/" + toString(c.dtype) +
         "/d" + std::to_string(c.dim) + "/" + shape + "/" +
         (c.initialState ? "init" : "zero");
}

/// The shapes run for every preset, strategy, dtype and head dim. Each
/// distinct (heads, value heads, varlen, initial state) is one more kernel
/// to compile, so the shapes share as few as the coverage allows: five
/// kernels per combination.
struct Shape {
  int64_t batch, seqLen, heads, valueHeads;
  std::vector<int64_t> lengths;
  bool initialState;
};

std::vector<Shape> shapes() {
  // defaultSchedule's chunks are 64 tokens at K = 64 and 32 at K = 128, so
  // 63, 64 and 65 end just before, on and just after a chunk boundary at
  // both. Packed sequences also start mid-chunk of the packed T, include an
  // empty one, and each restarts its chunks at its own start.
  const std::vector<int64_t> varlen = {1, 63, 64, 65, 200, 0, 300};
  int64_t packed = 0;
  for (int64_t length : varlen)
    packed += length;
  return {
      // Partial, whole and many chunks; batch rows are separate sequences.
      {2, 1, 2, 2, {}, true},
      {2, 63, 2, 2, {}, true},
      {2, 64, 2, 2, {}, true},
      {2, 1000, 2, 2, {}, true},
      // A long sequence, and one past a boundary in an odd batch, with a
      // zero initial state on one head.
      {1, 4096, 1, 1, {}, false},
      {3, 65, 1, 1, {}, false},
      // 256 (sequence, head) pairs: a realistic grid.
      {4, 64, 64, 64, {}, true},
      // Grouped value heads: value head hv reads q/k head hv / 2.
      {2, 200, 2, 4, {}, true},
      // Packed sequences with cu_seqlens.
      {1, packed, 2, 2, varlen, true},
  };
}

/// The --quick case of each preset x strategy x dtype (and of f16).
bool isQuickShape(const Shape &s, int64_t dim) {
  return dim == 128 && s.batch == 2 && s.seqLen == 1000;
}

Case makeCase(const std::string &preset, Strategy strategy, DType dtype,
              int64_t dim, const Shape &shape) {
  Case c;
  c.preset = preset;
  c.strategy = strategy;
  c.dtype = dtype;
  c.dim = dim;
  c.batch = shape.batch;
  c.seqLen = shape.seqLen;
  c.heads = shape.heads;
  c.valueHeads = shape.valueHeads;
  c.lengths = shape.lengths;
  c.initialState = shape.initialState;
  c.quick = isQuickShape(shape, dim);
  c.name = caseName(c);
  return c;
}

/// Every preset x {fused, materialize} x {bf16, f32} x {64, 128} x shapes(),
/// plus f16 at one shape per preset x strategy: f16 is a supported input
/// dtype with its own conversions in the kernel, so it gets checked too.
std::vector<Case> allCases() {
  std::vector<Case> cases;
  const Strategy strategies[] = {Strategy::FusedScan, Strategy::Materialize};
  for (const Preset &preset : presets()) {
    for (Strategy strategy : strategies) {
      for (DType dtype : {DType::BF16, DType::F32})
        for (int64_t dim : {64, 128})
          for (const Shape &shape : shapes())
            cases.push_back(makeCase(preset.name, strategy, dtype, dim, shape));
      for (const Shape &shape : shapes())
        if (isQuickShape(shape, 128))
          cases.push_back(
              makeCase(preset.name, strategy, DType::F16, 128, shape));
    }
  }
  return cases;
}

/// What the float64 reference costs: ~4 flops per state element per token
/// and value head (decay, write, read).
double referenceFlops(const Case &c) {
  return 4.0 * double(c.batch) * double(c.seqLen) * double(c.valueHeads) *
         double(c.dim) * double(c.dim);
}

/// The spec the case compiles: the preset at the case's size.
Spec caseSpec(const Case &c) {
  Spec spec = findPreset(c.preset)->spec;
  spec.keyDim = c.dim;
  spec.valueDim = c.dim;
  spec.heads = c.heads;
  spec.valueHeads = c.valueHeads;
  spec.dtype = c.dtype;
  spec.initialState = c.initialState;
  spec.finalState = true;
  spec.varlen = !c.lengths.empty();
  return spec;
}

/// Everything a compiled kernel depends on; cases with equal keys share one.
std::string kernelKey(const Case &c) {
  return c.preset + "/" + strategyName(c.strategy) + "/" + toString(c.dtype) +
         "/d" + std::to_string(c.dim) + "/H" + std::to_string(c.heads) + ".HV" +
         std::to_string(c.valueHeads) + (c.lengths.empty() ? "" : "/varlen") +
         (c.initialState ? "/init" : "/zero");
}

/// A fixed, nonzero seed per case name: reruns reproduce a failure, and no
/// two cases draw the same inputs.
uint64_t caseSeed(const std::string &name, uint64_t base) {
  uint64_t hash = 0xcbf29ce484222325ull; // FNV-1a
  for (unsigned char ch : name)
    hash = (hash ^ ch) * 0x100000001b3ull;
  hash ^= base * 0x9E3779B97F4A7C15ull;
  return hash ? hash : 1;
}

//===----------------------------------------------------------------------===//
// Command line
//===----------------------------------------------------------------------===//

struct Options {
  std::string filter;
  bool quick = false;
  bool list = false;
  bool selfTest = false;
  unsigned threads = 0; ///< 0: hardware_concurrency
  std::string jsonPath;
  uint64_t seed = 0;
  int device = 0;
};

void printUsage(FILE *out) {
  std::fprintf(
      out,
      "usage: lina-gpu-suite [options]\n"
      "Runs generated chunkwise kernels on GPU 0 and checks them against the\n"
      "float64 reference. Exit status: 0 all passed, 1 a case failed, 2 a\n"
      "usage error, 77 no GPU, driver or NVRTC here (skipped).\n\n"
      "  --filter SUBSTR  only cases whose name contains SUBSTR\n"
      "                   (names look like gdn/fused/bf16/d128/B2.T1000.H2.HV2/"
      "init)\n"
      "  --quick          one case per preset x strategy x dtype\n"
      "  --list           print the selected case names and exit\n"
      "  --self-test      check the suite itself (no GPU needed) and exit\n"
      "  --threads N      CPU threads for compiling and the reference "
      "(default: all)\n"
      "  --json FILE      write every case's result to FILE\n"
      "  --seed N         vary the random inputs (default 0)\n"
      "  --device N       GPU ordinal (default 0)\n"
      "  --help           this text\n");
}

bool parseUnsigned(const std::string &text, uint64_t limit, uint64_t &value) {
  if (text.empty() || text.size() > 19 ||
      text.find_first_not_of("0123456789") != std::string::npos)
    return false;
  value = std::strtoull(text.c_str(), nullptr, 10);
  return value <= limit;
}

/// Parses argv into `options`; returns -1 to go on, or the exit status.
int parseOptions(int argc, char **argv, Options &options) {
  auto usageError = [](const std::string &message) {
    std::fprintf(stderr, "lina-gpu-suite: %s (see --help)\n", message.c_str());
    return kExitUsage;
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    bool hasInlineValue = false;
    if (size_t eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != arg.npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      hasInlineValue = true;
    }
    auto takeValue = [&]() -> bool {
      if (hasInlineValue)
        return true;
      if (i + 1 >= argc)
        return false;
      value = argv[++i];
      return true;
    };
    uint64_t number = 0;
    if (arg == "--help" || arg == "-h") {
      printUsage(stdout);
      return kExitPass;
    } else if (arg == "--quick" && !hasInlineValue) {
      options.quick = true;
    } else if (arg == "--list" && !hasInlineValue) {
      options.list = true;
    } else if (arg == "--self-test" && !hasInlineValue) {
      options.selfTest = true;
    } else if (arg == "--filter") {
      if (!takeValue())
        return usageError("--filter needs a substring");
      options.filter = value;
    } else if (arg == "--json") {
      if (!takeValue() || value.empty())
        return usageError("--json needs a file name");
      options.jsonPath = value;
    } else if (arg == "--threads") {
      if (!takeValue() || !parseUnsigned(value, 1024, number) || number == 0)
        return usageError("--threads needs a number from 1 to 1024");
      options.threads = static_cast<unsigned>(number);
    } else if (arg == "--seed") {
      if (!takeValue() || !parseUnsigned(value, UINT64_MAX / 2, number))
        return usageError("--seed needs a non-negative integer");
      options.seed = number;
    } else if (arg == "--device") {
      if (!takeValue() || !parseUnsigned(value, 1023, number))
        return usageError("--device needs a GPU ordinal");
      options.device = static_cast<int>(number);
    } else {
      return usageError("unknown argument '" + std::string(argv[i]) + "'");
    }
  }
  if (options.threads == 0)
    options.threads = std::max(1u, std::thread::hardware_concurrency());
  return -1;
}

std::vector<Case> selectCases(const Options &options) {
  std::vector<Case> selected;
  for (Case &c : allCases())
    if ((!options.quick || c.quick) &&
        c.name.find(options.filter) != std::string::npos)
      selected.push_back(std::move(c));
  return selected;
}

//===----------------------------------------------------------------------===//
// CPU threads
//===----------------------------------------------------------------------===//

/// A fixed set of worker threads with two queues. Inputs and reference
/// checks go first: each holds a whole problem in memory, so draining them
/// bounds memory, and the compiles behind them are waited for only by the
/// GPU loop. No task waits for another, so no order can deadlock.
class WorkPool {
public:
  explicit WorkPool(unsigned threads) {
    for (unsigned i = 0; i < threads; ++i)
      workers_.emplace_back([this] { work(); });
  }
  ~WorkPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    ready_.notify_all();
    for (std::thread &worker : workers_)
      worker.join();
  }

  void submit(std::function<void()> task, bool urgent) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      (urgent ? urgent_ : background_).push_back(std::move(task));
    }
    ready_.notify_one();
  }

private:
  void work() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [this] {
          return stopping_ || !urgent_.empty() || !background_.empty();
        });
        std::deque<std::function<void()>> &queue =
            !urgent_.empty() ? urgent_ : background_;
        if (queue.empty())
          return; // stopping, and nothing left to do
        task = std::move(queue.front());
        queue.pop_front();
      }
      task();
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> urgent_, background_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

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
// Results
//===----------------------------------------------------------------------===//

std::string formatError(double error) {
  if (std::isnan(error))
    return "nan";
  if (std::isinf(error))
    return "inf";
  char text[32];
  std::snprintf(text, sizeof(text), "%.2e", error);
  return text;
}

/// `message` with every line indented, to set it off from the case lines.
std::string indent(const std::string &message) {
  std::string out;
  size_t start = 0;
  while (start < message.size()) {
    size_t end = std::min(message.find('\n', start), message.size());
    out += "    " + message.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return out;
}

/// The first line of `message`, at most `width` characters.
std::string firstLine(const std::string &message, size_t width) {
  std::string line = message.substr(0, message.find('\n'));
  return line.size() > width ? line.substr(0, width - 3) + "..." : line;
}

struct CaseResult {
  bool done = false, passed = false;
  bool compared = false; ///< the kernel ran and was checked
  double outputError = std::numeric_limits<double>::infinity();
  double stateError = std::numeric_limits<double>::infinity();
  std::string message; ///< why it failed, when it did not get to compare
  double gpuMilliseconds = 0, referenceMilliseconds = 0;
  double compileSeconds = 0; ///< of its kernel, shared with other cases
  uint64_t seed = 0;
};

/// Collects results from the GPU loop and the reference workers and prints
/// one line per case as it is decided.
class Results {
public:
  explicit Results(const std::vector<Case> &cases)
      : cases_(cases), results_(cases.size()) {
    for (const Case &c : cases)
      nameWidth_ = std::max(nameWidth_, static_cast<int>(c.name.size()));
  }

  void record(size_t index, CaseResult result) {
    std::lock_guard<std::mutex> lock(mutex_);
    result.done = true;
    results_[index] = std::move(result);
    printLine(index);
  }

  /// Waits until fewer than `limit` reference checks are pending.
  void waitForRoom(size_t limit) {
    std::unique_lock<std::mutex> lock(mutex_);
    room_.wait(lock, [&] { return pending_ < limit; });
  }
  void referenceStarted() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++pending_;
  }
  void referenceFinished(size_t index, CaseResult result) {
    record(index, std::move(result));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --pending_;
    }
    room_.notify_all();
  }
  void waitForAll() { waitForRoom(1); }

  const std::vector<CaseResult> &all() const { return results_; }

private:
  void printLine(size_t index) {
    ++printed_;
    const CaseResult &r = results_[index];
    std::string output = r.compared ? formatError(r.outputError) : "-";
    std::string state = r.compared ? formatError(r.stateError) : "-";
    std::printf("[%4zu/%zu] %s  %-*s  out %-8s  state %-8s  gpu %8.3f ms  "
                "ref %6.0f ms\n%s",
                printed_, results_.size(), r.passed ? "PASS" : "FAIL",
                nameWidth_, cases_[index].name.c_str(), output.c_str(),
                state.c_str(), r.gpuMilliseconds, r.referenceMilliseconds,
                indent(r.message).c_str());
    std::fflush(stdout);
  }

  const std::vector<Case> &cases_;
  std::vector<CaseResult> results_;
  std::mutex mutex_;
  std::condition_variable room_;
  size_t pending_ = 0, printed_ = 0;
  int nameWidth_ = 0;
};

/// Compares a device run with the reference (on a worker thread).
CaseResult checkAgainstReference(const Case &c, const reference::Problem &p,
                                 const DeviceRun &run, CaseResult result) {
  double start = now();
  reference::Result expected = reference::runRecurrent(p);
  result.referenceMilliseconds = (now() - start) * 1e3;
  result.compared = true;
  result.outputError = reference::relativeError(run.o, expected.o);
  result.stateError =
      reference::relativeError(run.finalState, expected.finalState);
  result.passed = result.outputError <= tolerance(c.dtype) &&
                  result.stateError <= tolerance(c.dtype);
  return result;
}

//===----------------------------------------------------------------------===//
// Reports
//===----------------------------------------------------------------------===//

/// One line per preset x strategy x dtype: how many passed, the worst errors.
void printSummaryTable(const std::vector<Case> &cases,
                       const std::vector<CaseResult> &results) {
  struct Row {
    size_t passed = 0, total = 0, compared = 0;
    double worstOutput = 0, worstState = 0;
  };
  std::vector<std::string> order;
  std::map<std::string, Row> rows;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case &c = cases[i];
    char key[96];
    std::snprintf(key, sizeof(key), "%-12s %-12s %-5s", c.preset.c_str(),
                  strategyName(c.strategy), toString(c.dtype));
    if (!rows.count(key))
      order.push_back(key);
    Row &row = rows[key];
    ++row.total;
    row.passed += results[i].passed;
    if (!results[i].compared)
      continue; // it has no errors to speak of
    ++row.compared;
    // relativeError reports NaN as inf, so std::max sees no NaN here.
    row.worstOutput = std::max(row.worstOutput, results[i].outputError);
    row.worstState = std::max(row.worstState, results[i].stateError);
  }
  std::printf("\n%-12s %-12s %-5s %-9s %-10s %s\n", "preset", "strategy",
              "dtype", "passed", "worst out", "worst state");
  for (const std::string &key : order) {
    const Row &row = rows[key];
    std::string passed =
        std::to_string(row.passed) + "/" + std::to_string(row.total);
    bool any = row.compared > 0;
    std::printf("%s %-9s %-10s %-10s%s\n", key.c_str(), passed.c_str(),
                any ? formatError(row.worstOutput).c_str() : "-",
                any ? formatError(row.worstState).c_str() : "-",
                row.passed == row.total ? "" : " FAIL");
  }
}

std::string jsonString(const std::string &text) {
  std::string out = "\"";
  for (unsigned char ch : text) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += static_cast<char>(ch);
    } else if (ch < 0x20) {
      char escape[8];
      std::snprintf(escape, sizeof(escape), "\\u%04x", ch);
      out += escape;
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out + "\"";
}

/// JSON has no infinity: a non-finite error is written as null.
std::string jsonNumber(double value) {
  if (!std::isfinite(value))
    return "null";
  char text[32];
  std::snprintf(text, sizeof(text), "%.6g", value);
  return text;
}

bool writeJson(const std::string &path, const cuda::Device &device,
               const std::vector<Case> &cases,
               const std::vector<CaseResult> &results) {
  FILE *file = std::fopen(path.c_str(), "w");
  if (!file)
    return false;
  std::fprintf(file, "{\n  \"gpu\": %s,\n  \"arch\": %s,\n  \"cases\": [\n",
               jsonString(device.name).c_str(),
               jsonString(device.arch).c_str());
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case &c = cases[i];
    const CaseResult &r = results[i];
    std::string lengths;
    for (int64_t length : c.lengths)
      lengths += (lengths.empty() ? "" : ", ") + std::to_string(length);
    std::fprintf(
        file,
        "    {\"name\": %s, \"preset\": %s, \"strategy\": %s, \"dtype\": %s, "
        "\"dim\": %" PRId64 ", \"batch\": %" PRId64 ", \"seqLen\": %" PRId64
        ", \"heads\": %" PRId64 ", \"valueHeads\": %" PRId64
        ", \"varlen\": [%s], \"initialState\": %s, \"seed\": %" PRIu64
        ", \"passed\": %s, \"compared\": %s, \"tolerance\": %s, "
        "\"outputError\": %s, "
        "\"stateError\": %s, \"gpuMs\": %s, \"referenceMs\": %s, "
        "\"kernelCompileS\": %s, \"message\": %s}%s\n",
        jsonString(c.name).c_str(), jsonString(c.preset).c_str(),
        jsonString(strategyName(c.strategy)).c_str(),
        jsonString(toString(c.dtype)).c_str(), c.dim, c.batch, c.seqLen,
        c.heads, c.valueHeads, lengths.c_str(),
        c.initialState ? "true" : "false", r.seed, r.passed ? "true" : "false",
        r.compared ? "true" : "false", jsonNumber(tolerance(c.dtype)).c_str(),
        jsonNumber(r.outputError).c_str(), jsonNumber(r.stateError).c_str(),
        jsonNumber(r.gpuMilliseconds).c_str(),
        jsonNumber(r.referenceMilliseconds).c_str(),
        jsonNumber(r.compileSeconds).c_str(), jsonString(r.message).c_str(),
        i + 1 < cases.size() ? "," : "");
  }
  std::fprintf(file, "  ]\n}\n");
  return std::fclose(file) == 0;
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
                    options_.device);
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
    const Case &c = cases_[index];
    Results &results = results_;
    pool_->submit(
        [&results, &c, index, problem, device, result] {
          results.referenceFinished(
              index, checkAgainstReference(c, *problem, *device, result));
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
  std::set<std::string> names;
  for (const Case &c : cases) {
    if (!names.insert(c.name).second)
      why = "two cases are named " + c.name;
    else if (std::vector<std::string> errors = validate(caseSpec(c));
             !errors.empty())
      why = c.name + ": " + errors.front();
    // One problem per preset and shape is enough to check the shapes.
    else if (c.dim == 64 && c.dtype == DType::F32 &&
             c.strategy == Strategy::FusedScan) {
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
  std::printf("self-test passed: conversions exact, %zu cases valid\n",
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
