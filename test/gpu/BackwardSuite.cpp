//===- BackwardSuite.cpp - lina-backward-suite ---------------------------===//
//
// Part of lina. The backward's generated kernels (planBackwardKernel) on a
// GPU against the float64 backward recurrence, on fresh random inputs
// rounded to what the device reads: every preset at shapes with a partial
// last chunk, d128, grouped value heads and packed sequences, bf16 and a
// few f16 and f32 cases. Every gradient buffer is poisoned with NaN between
// guard bands (runBackwardOnDevice), and each gradient's relative error must
// be within the forward's tolerance for the dtype. scripts/gpu-check.sh
// --backward runs it; without a GPU it exits 77 (skipped). --random N runs
// N specs drawn from the valid spec space instead (seeded by --seed), the
// generator's reach beyond the presets.
//
//===----------------------------------------------------------------------===//
#include "lina/Codegen/KernelPlanner.h"
#include "lina/Reference/Backward.h"
#include "lina/Reference/DeviceCheck.h"
#include "lina/Reference/Problem.h"
#include "lina/Reference/Reference.h"
#include "lina/Runtime/Device.h"
#include "lina/Runtime/Driver.h"
#include "lina/Runtime/Nvrtc.h"
#include "lina/Spec/Presets.h"

#include "RandomSpecs.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace lina;

namespace {

constexpr int kExitPass = 0, kExitFail = 1, kExitUsage = 2, kExitSkip = 77;

struct BackwardCase {
  std::string preset;
  DType dtype = DType::BF16;
  int64_t dim = 64; ///< K = V
  int64_t batch = 1, seqLen = 0, heads = 1, valueHeads = 1;
  std::vector<int64_t> lengths; ///< varlen: the packed sequences
  bool quick = false;
  std::string name;
  /// A drawn spec (--random), used as it is instead of the preset's.
  std::optional<Spec> drawn;
};

std::vector<BackwardCase> allCases() {
  std::vector<BackwardCase> cases;
  auto add = [&](BackwardCase c) {
    std::string shape = "B" + std::to_string(c.batch) + ".T" +
                        std::to_string(c.seqLen) + ".H" +
                        std::to_string(c.heads) + ".HV" +
                        std::to_string(c.valueHeads);
    if (!c.lengths.empty()) {
      shape = "varlen";
      for (int64_t n : c.lengths)
        shape += "." + std::to_string(n);
    }
    c.name = c.preset + "/" + toString(c.dtype) + "/d" +
             std::to_string(c.dim) + "/" + shape;
    cases.push_back(c);
  };
  for (const std::string &preset : presetNames()) {
    // Two sequences with a partial last chunk; a d128 head; four value
    // heads on two key heads; packed sequences, one empty.
    add({preset, DType::BF16, 64, 2, 100, 2, 2, {}, true});
    add({preset, DType::BF16, 128, 1, 256, 2, 2, {}, false});
    add({preset, DType::BF16, 64, 1, 128, 2, 4, {}, false});
    add({preset, DType::BF16, 64, 1, 200, 2, 2, {37, 0, 100, 63}, false});
  }
  for (const char *preset : {"gdn", "kda", "gla"}) {
    add({preset, DType::F16, 64, 2, 100, 2, 2, {}, false});
    add({preset, DType::F32, 64, 2, 100, 2, 2, {}, true});
  }
  return cases;
}

Spec caseSpec(const BackwardCase &c) {
  if (c.drawn)
    return *c.drawn;
  Spec s = findPreset(c.preset)->spec;
  s.dtype = c.dtype;
  s.keyDim = s.valueDim = c.dim;
  s.heads = c.heads;
  s.valueHeads = c.valueHeads;
  s.initialState = s.finalState = true;
  s.varlen = !c.lengths.empty();
  return s;
}

/// `count` specs drawn from the valid spec space (RandomSpecs.h), each at a
/// shape drawn with it; one the backward's planner refuses fails its case.
std::vector<BackwardCase> randomCases(int count, uint64_t seed) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 17);
  std::vector<BackwardCase> cases;
  for (int attempt = 0; attempt < 100 * count && (int)cases.size() < count;
       ++attempt) {
    std::optional<Spec> s = randomspecs::drawKernelSpec(rng);
    if (!s)
      continue;
    randomspecs::DrawnShape shape = randomspecs::drawShape(rng, s->varlen);
    BackwardCase c;
    c.drawn = s;
    c.dtype = s->dtype;
    c.dim = s->keyDim;
    c.heads = s->heads;
    c.valueHeads = s->valueHeads;
    c.batch = shape.batch;
    c.seqLen = shape.seqLen;
    c.lengths = shape.lengths;
    c.preset = "random" + std::to_string(cases.size());
    c.name = c.preset + "/" + randomspecs::describeSpec(*s) +
             (s->varlen ? "/varlen"
                        : "/B" + std::to_string(c.batch) + ".T" +
                              std::to_string(c.seqLen)) +
             (s->initialState ? "/h0" : "") + (s->finalState ? "/ht" : "");
    cases.push_back(c);
  }
  return cases;
}

uint64_t caseSeed(const std::string &name, uint64_t base) {
  return std::hash<std::string>{}(name) ^ (base * 0x9E3779B97F4A7C15ull);
}

std::string whyNoGpu() {
  if (!cuda::Driver::get().available())
    return cuda::Driver::get().status().message();
  Expected<int> count = cuda::deviceCount();
  if (!count.ok())
    return count.message();
  if (*count < 1)
    return "the driver sees no GPU";
  if (!cuda::Nvrtc::get().available())
    return cuda::Nvrtc::get().status().message();
  return "";
}

struct Outcome {
  bool passed = false;
  double worst = 0;
  std::string worstName, message;
};

/// Kernels by spec: cases of one spec share a compile.
std::map<std::string, BackwardKernel> kernels;

Outcome runCase(const BackwardCase &c, uint64_t seed) {
  Outcome r;
  Spec spec = caseSpec(c);
  std::mt19937_64 rng(seed);
  std::vector<int64_t> cuSeqlens;
  if (!c.lengths.empty()) {
    cuSeqlens.push_back(0);
    for (int64_t n : c.lengths)
      cuSeqlens.push_back(cuSeqlens.back() + n);
  }
  reference::Problem problem =
      reference::randomProblem(spec, c.batch, c.seqLen, rng, cuSeqlens);
  std::string key =
      c.drawn
          ? c.name
          : c.preset + "/" + toString(c.dtype) + "/" + std::to_string(c.dim) +
                "/" + std::to_string(c.heads) + "/" +
                std::to_string(c.valueHeads) + (spec.varlen ? "/varlen" : "");
  auto found = kernels.find(key);
  if (found == kernels.end()) {
    Expected<BackwardPlan> plan = planBackwardKernel(spec, {});
    if (!plan.ok())
      return {false, 0, "", "plan: " + plan.message()};
    Expected<BackwardKernel> kernel = BackwardKernel::load(*plan, 0);
    if (!kernel.ok())
      return {false, 0, "", "load: " + kernel.message()};
    found = kernels.emplace(key, std::move(*kernel)).first;
  }
  reference::HostInputs inputs = reference::encodeProblem(problem);
  reference::OutputGradients d =
      reference::randomOutputGradients(problem, spec.finalState, rng);
  Expected<reference::DeviceBackwardRun> run = reference::runBackwardOnDevice(
      found->second, problem, inputs, d.dO, d.dFinalState, 0);
  if (!run.ok())
    return {false, 0, "", run.message()};
  if (!reference::isFinite(reference::runRecurrent(problem)))
    return {false, 0, "", "the float64 reference overflowed"};
  reference::Gradients expected =
      reference::runRecurrentBackward(problem, d.dO, d.dFinalState);
  r.passed = true;
  for (const reference::GradientError &e :
       reference::compareGradients(run->gradients, expected)) {
    // NaN compares false: a NaN error is never within tolerance.
    if (!(e.error <= reference::tolerance(spec.dtype)))
      r.passed = false;
    if (!(e.error <= r.worst)) {
      r.worst = e.error;
      r.worstName = e.name;
    }
  }
  return r;
}

/// Without a GPU: unique names, every case's spec plans.
int selfTest() {
  std::set<std::string> names;
  std::vector<BackwardCase> cases = allCases();
  for (const BackwardCase &c : cases) {
    if (!names.insert(c.name).second) {
      std::printf("self-test FAILED: two cases are named %s\n", c.name.c_str());
      return kExitFail;
    }
    Expected<BackwardPlan> plan = planBackwardKernel(caseSpec(c), {});
    if (!plan.ok()) {
      std::printf("self-test FAILED: %s: %s\n", c.name.c_str(),
                  plan.message().c_str());
      return kExitFail;
    }
  }
  std::printf("self-test passed: %zu cases, all planned\n", cases.size());
  return kExitPass;
}

} // namespace

int main(int argc, char **argv) {
  bool quick = false, selfTestOnly = false;
  std::string filter;
  uint64_t seed = 0;
  int random = 0;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--quick")
      quick = true;
    else if (arg == "--self-test")
      selfTestOnly = true;
    else if (arg == "--filter" && i + 1 < argc)
      filter = argv[++i];
    else if (arg == "--seed" && i + 1 < argc)
      seed = std::strtoull(argv[++i], nullptr, 10);
    else if (arg == "--random" && i + 1 < argc &&
             (random = std::atoi(argv[i + 1])) > 0)
      ++i;
    else {
      std::fprintf(stderr,
                   "lina-backward-suite: bad argument '%s' (takes --quick, "
                   "--filter SUBSTR, --seed N, --random N, --self-test)\n",
                   arg.c_str());
      return kExitUsage;
    }
  }
  if (selfTestOnly)
    return selfTest();
  std::vector<BackwardCase> cases;
  for (const BackwardCase &c : random ? randomCases(random, seed) : allCases())
    if ((!quick || c.quick) && c.name.find(filter) != std::string::npos)
      cases.push_back(c);
  if (cases.empty()) {
    std::fprintf(stderr, "lina-backward-suite: no case matches --filter '%s'\n",
                 filter.c_str());
    return kExitUsage;
  }
  if (std::string reason = whyNoGpu(); !reason.empty()) {
    std::printf("SKIP: no GPU to run on: %s\n", reason.c_str());
    return kExitSkip;
  }
  auto start = std::chrono::steady_clock::now();
  size_t passed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const BackwardCase &c = cases[i];
    Outcome r = runCase(c, caseSeed(c.name, seed));
    passed += r.passed;
    std::printf("[%3zu/%zu] %s  %-40s  worst %s %.2e%s%s\n", i + 1,
                cases.size(), r.passed ? "PASS" : "FAIL", c.name.c_str(),
                r.worstName.c_str(), r.worst, r.message.empty() ? "" : "\n    ",
                r.message.c_str());
    std::fflush(stdout);
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::printf("cases   %zu passed, %zu failed, %zu total in %.1f s\n", passed,
              cases.size() - passed, cases.size(), seconds);
  std::printf("result  %s\n", passed == cases.size() ? "PASS" : "FAIL");
  return passed == cases.size() ? kExitPass : kExitFail;
}
