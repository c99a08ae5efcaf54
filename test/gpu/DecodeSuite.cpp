//===- DecodeSuite.cpp - Decode kernels against the float64 reference ---===//
//
// Part of lina. `lina-decode-suite`: every preset's decode kernel on a real
// GPU, for the state pool (slot per sequence, one negative), speculative
// decoding (slot per token, accepted counts), fla's state form, every warp
// width, and a chunk-kernel prefill continued by decode calls in place, each
// against the float64 decode semantics on the same rounded inputs, with
// NaN-poisoned outputs and guard bands. `--bench` times the decode step.
//
// Exit status: 0 every case passed, 1 a case failed, 2 a usage error, 77 no
// GPU, driver or NVRTC here (skipped).
//
//===----------------------------------------------------------------------===//
#include "DecodeSuite.h"

#include "lina/Codegen/DecodePlanner.h"
#include "lina/Reference/DeviceCheck.h"
#include "lina/Runtime/Device.h"
#include "lina/Runtime/Driver.h"
#include "lina/Runtime/Nvrtc.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <unistd.h>

using namespace lina;
using namespace lina::decodesuite;

namespace {

struct Options {
  std::string filter;
  bool quick = false, list = false, selfTest = false, bench = false;
  bool sweep = false;
  std::vector<std::string> benchPresets = {"gdn", "kda"};
  uint64_t seed = 0;
  int device = 0;
};

void usage(FILE *out) {
  std::fprintf(
      out,
      "usage: lina-decode-suite [options]\n"
      "Runs the generated decode kernels on a GPU and checks them against the\n"
      "float64 decode semantics. Exit status: 0 all passed, 1 a case failed,\n"
      "2 a usage error, 77 no GPU, driver or NVRTC here (skipped).\n\n"
      "  --filter SUBSTR  only cases whose name contains SUBSTR\n"
      "                   (names look like gdn/pool/bf16/d128/B5.T4.H2.HV4/"
      "w0x0)\n"
      "  --quick          a few cases per preset and dtype\n"
      "  --list           print the selected case names and exit\n"
      "  --self-test      check the suite itself (no GPU needed) and exit\n"
      "  --bench [P,P]    time the decode step (default presets gdn,kda)\n"
      "  --sweep          with --bench: time every schedule of the tuner's\n"
      "                   space (warp columns x warps) at each batch\n"
      "  --seed N         vary the random inputs (default 0)\n"
      "  --device N       GPU ordinal (default 0)\n");
}

int parse(int argc, char **argv, Options &o) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](std::string &out) {
      if (i + 1 >= argc)
        return false;
      out = argv[++i];
      return true;
    };
    std::string v;
    if (arg == "--help") {
      usage(stdout);
      return kExitPass;
    } else if (arg == "--quick") {
      o.quick = true;
    } else if (arg == "--list") {
      o.list = true;
    } else if (arg == "--self-test") {
      o.selfTest = true;
    } else if (arg == "--sweep") {
      o.sweep = true;
    } else if (arg == "--bench") {
      o.bench = true;
      if (i + 1 < argc && argv[i + 1][0] != '-') {
        o.benchPresets.clear();
        std::string list = argv[++i];
        for (size_t at = 0; at <= list.size();) {
          size_t comma = list.find(',', at);
          if (comma == std::string::npos)
            comma = list.size();
          o.benchPresets.push_back(list.substr(at, comma - at));
          at = comma + 1;
        }
      }
    } else if (arg == "--filter" && value(v)) {
      o.filter = v;
    } else if ((arg == "--seed" || arg == "--device") && value(v) &&
               !v.empty() && v.size() < 10 &&
               v.find_first_not_of("0123456789") == std::string::npos) {
      if (arg == "--seed")
        o.seed = std::strtoull(v.c_str(), nullptr, 10);
      else
        o.device = std::atoi(v.c_str());
    } else {
      std::fprintf(stderr,
                   "lina-decode-suite: bad argument '%s' (see --help)\n",
                   arg.c_str());
      return kExitUsage;
    }
  }
  return -1;
}

std::string whyNoGpu(int device) {
  if (!cuda::Driver::get().available())
    return cuda::Driver::get().status().message();
  Expected<int> count = cuda::deviceCount();
  if (!count.ok())
    return count.message();
  if (*count <= device)
    return "the driver sees " + std::to_string(*count) + " GPU(s)";
  if (!cuda::Nvrtc::get().available())
    return cuda::Nvrtc::get().status().message();
  return "";
}

std::atomic<const char *> runningCase{nullptr};

extern "C" void onSignal(int signal) {
  static std::atomic<bool> reported{false};
  if (reported.exchange(true))
    return;
  auto say = [](const char *text) {
    ssize_t ignored = ::write(STDOUT_FILENO, text, std::strlen(text));
    (void)ignored;
  };
  say("\nlina-decode-suite: stopped by a signal");
  if (const char *name = runningCase.load()) {
    say(" while running ");
    say(name);
  }
  say("\nresult  FAIL\n");
  ::_exit(128 + signal);
}

std::string format(double e) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2e", e);
  return text;
}

/// Without a GPU: unique names, every spec plans for its schedule.
int selfTest() {
  std::string why;
  if (!reference::conversionsAreExact(why)) {
    std::printf("self-test FAILED: %s\n", why.c_str());
    return kExitFail;
  }
  std::vector<DecodeCase> cases = allCases();
  std::set<std::string> names, planned;
  for (const DecodeCase &c : cases) {
    if (!names.insert(c.name).second) {
      std::printf("self-test FAILED: two cases are named %s\n", c.name.c_str());
      return kExitFail;
    }
    Expected<DecodePlan> plan = planDecodeKernel(caseSpec(c), c.schedule);
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
  Options o;
  if (int status = parse(argc, argv, o); status >= 0)
    return status;
  if (o.selfTest)
    return selfTest();
  std::vector<DecodeCase> cases;
  for (const DecodeCase &c : allCases())
    if ((!o.quick || c.quick) && c.name.find(o.filter) != std::string::npos)
      cases.push_back(c);
  if (!o.bench && cases.empty()) {
    std::fprintf(stderr, "lina-decode-suite: no case matches --filter '%s'\n",
                 o.filter.c_str());
    return kExitUsage;
  }
  if (o.list) {
    for (const DecodeCase &c : cases)
      std::printf("%s\n", c.name.c_str());
    std::printf("%zu cases\n", cases.size());
    return kExitPass;
  }
  if (std::string reason = whyNoGpu(o.device); !reason.empty()) {
    std::printf("SKIP: no GPU to run on: %s\n", reason.c_str());
    return kExitSkip;
  }
  Expected<cuda::Device> device = cuda::queryDevice(o.device);
  if (!device.ok()) {
    std::printf("FAIL: cannot describe GPU %d: %s\n", o.device,
                device.message().c_str());
    return kExitFail;
  }
  std::printf("lina-decode-suite: %s (%s, %d SMs)\n", device->name.c_str(),
              device->arch.c_str(), device->smCount);
  if (o.bench)
    return runBench(o.device, o.benchPresets, o.sweep);

  std::signal(SIGTERM, onSignal);
  std::signal(SIGINT, onSignal);
  auto start = std::chrono::steady_clock::now();
  size_t passed = 0;
  std::vector<std::string> failures;
  for (size_t i = 0; i < cases.size(); ++i) {
    const DecodeCase &c = cases[i];
    runningCase = c.name.c_str();
    Outcome r = runCase(c, o.device, caseSeed(c.name, o.seed));
    runningCase = nullptr;
    passed += r.passed;
    std::string errors = r.compared ? "out " + format(r.outputError) +
                                          "  state " + format(r.stateError)
                                    : "";
    std::printf("[%4zu/%zu] %s  %-48s  %-32s w%lld%s%s\n", i + 1, cases.size(),
                r.passed ? "PASS" : "FAIL", c.name.c_str(), errors.c_str(),
                (long long)r.warpColumns, r.message.empty() ? "" : "\n    ",
                r.message.c_str());
    std::fflush(stdout);
    if (!r.passed)
      failures.push_back(c.name + ": " +
                         (r.compared
                              ? errors + (r.keptSlots ? "" : ", " + r.message)
                              : r.message.substr(0, 200)));
    if (!r.passed && !r.compared && !cuda::synchronizeDevice(o.device).ok() &&
        !cuda::synchronizeDevice(o.device).ok()) {
      std::printf("the CUDA context was lost in %s; stopping\n",
                  c.name.c_str());
      break;
    }
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  for (const std::string &f : failures)
    std::printf("FAILED %s\n", f.c_str());
  std::printf("cases   %zu passed, %zu failed, %zu total in %.1f s\n", passed,
              cases.size() - passed, cases.size(), seconds);
  std::printf("result  %s\n", passed == cases.size() ? "PASS" : "FAIL");
  return passed == cases.size() ? kExitPass : kExitFail;
}
