//===- Suite.h - lina-gpu-suite's shared types -----------------*- C++ -*-===//
//
// Part of lina. The cases, options and results that the suite's files share
// (GpuSuite.cpp runs them; SuiteCases.cpp makes them; SuiteOptions.cpp parses
// the command line; SuiteReport.cpp prints and writes the results).
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TEST_GPU_SUITE_H
#define LINA_TEST_GPU_SUITE_H

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


namespace lina::gpusuite {

using reference::DeviceRun;
using reference::HostInputs;
using reference::tolerance;
using reference::conversionsAreExact;

constexpr int kExitPass = 0;
constexpr int kExitFail = 1;
constexpr int kExitUsage = 2;
constexpr int kExitSkip = 77;

/// Seconds on a monotonic clock since some fixed point.
inline double now() {
  using Clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

/// One kernel run: a preset at a size, with a schedule strategy and dtype.
struct Case {
  std::string preset;
  Strategy strategy = Strategy::FusedScan;
  /// The schedule's prefetch knob (docs/perf-notes.md).
  bool prefetch = false;
  /// Value columns and warps per CTA; 0 takes defaultSchedule's. They pick
  /// how the register-resident state is spread over the warps
  /// (StateRegisters.cuh): the default splits the key columns four ways,
  /// tv128 w8 not at all, tv64 w8 two ways, tv16 w8 eight ways.
  int64_t tileV = 0, warps = 0;
  /// The schedule's shared_state knob: the state in shared memory.
  bool sharedState = false;
  /// The schedule's direct_decay flag: per-channel decay products summed
  /// directly rather than factored on the tensor cores.
  bool directDecay = false;
  /// The schedule's two_ctas flag: the scan asks for two CTAs an SM (the
  /// delta rules' whole heads where they outnumber the SMs).
  bool twoCTAs = false;
  /// The schedule's segments (Segments.cuh): each sequence run as up to this
  /// many pieces at once; 0 or 1: none.
  int64_t segments = 0;
  /// The schedule's warpgroup flag: the fused scan as warpgroup products
  /// (WgmmaScan.cuh; chunk 64, tile-v 128, eight warps, sm_90 only).
  bool warpgroup = false;
  /// q, k, v, a and b one element past a 16-byte boundary (runOnDevice's
  /// misalignInputs): the element-by-element loads.
  bool misaligned = false;
  /// The log gates as drawn times this (strong decays: 10 takes most of
  /// the per-channel wgmma prepare's block rows past its factoring bound,
  /// so they are summed directly).
  double gateScale = 1;
  DType dtype = DType::BF16;
  int64_t dim = 64; ///< K = V
  int64_t batch = 1, seqLen = 0, heads = 1, valueHeads = 1;
  /// Varlen: the packed sequences' lengths (batch 1); empty otherwise.
  std::vector<int64_t> lengths;
  bool initialState = true;
  bool quick = false; ///< part of the --quick subset
  std::string name;
  /// A drawn spec (--random), compiled as it is instead of the preset's.
  std::optional<Spec> drawn;
};

/// "gdn/fused/bf16/d128/B2.T1000.H2.HV2/init": --filter matches any part.
std::string caseName(const Case &c);
/// "fused", or "split+prefetch" with the prefetch knob, "+tv64w8" with a
/// layout of its own, "+shared" with the state in shared memory,
/// "+direct" with per-channel decay products summed directly, "+2cta" with
/// two CTAs an SM asked for.
std::string strategyName(const Case &c);
/// The whole matrix, in a stable order.
std::vector<Case> allCases();
/// --tiny: one tiny shape and one tiny varlen batch per preset x strategy
/// (bf16, and f32 for the plain shape): what compute-sanitizer runs over
/// (scripts/gpu-sanitize.sh), where every launch is 10-100x slower.
std::vector<Case> tinyCases();
/// --random N: N specs drawn from the valid spec space
/// (test/support/RandomSpecs.h), each
/// with a strategy, prefetch and shape drawn with it; seeded by `seed`.
std::vector<Case> randomCases(int count, uint64_t seed);
/// Nominal float64 work of the case's reference, to spread it over threads.
double referenceFlops(const Case &c);
Spec caseSpec(const Case &c);
/// Cases with equal keys share one compiled kernel.
std::string kernelKey(const Case &c);
uint64_t caseSeed(const std::string &name, uint64_t base);

struct Options {
  std::string filter;
  bool quick = false;
  bool tiny = false;  ///< the sanitizer set: tinyCases() instead
  int random = 0;     ///< --random N: drawn specs instead
  bool large = false; ///< the > 2^31-element case (SuiteLarge.cpp) only
  /// --large-wgmma: that case through the delta rule's wgmma scan (sm_90).
  bool largeWgmma = false;
  bool list = false;
  bool selfTest = false;
  unsigned threads = 0; ///< 0: hardware_concurrency
  std::string jsonPath;
  uint64_t seed = 0;
  int device = 0;
};

void printUsage(FILE *out);
/// Fills `options`; returns kExitPass to go on, else the exit status.
int parseOptions(int argc, char **argv, Options &options);
std::vector<Case> selectCases(const Options &options);

std::string formatError(double error);
/// `message` with every line indented.
std::string indent(const std::string &message);
/// The first line of `message`, at most `width` characters.
std::string firstLine(const std::string &message, size_t width);

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
CaseResult checkAgainstReference(const reference::Problem &p,
                                 const DeviceRun &run, CaseResult result);
/// One line per preset x strategy x dtype: how many passed, the worst errors.
void printSummaryTable(const std::vector<Case> &cases,
                       const std::vector<CaseResult> &results);
bool writeJson(const std::string &path, const cuda::Device &device,
               const std::vector<Case> &cases,
               const std::vector<CaseResult> &results);

} // namespace lina::gpusuite

#endif // LINA_TEST_GPU_SUITE_H
