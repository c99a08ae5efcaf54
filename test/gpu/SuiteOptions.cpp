//===- SuiteOptions.cpp - the command line ----------------------------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "Suite.h"

namespace lina::gpusuite {
//===----------------------------------------------------------------------===//
// Command line
//===----------------------------------------------------------------------===//

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
      "  --tiny           instead of the matrix, tiny cases per preset x "
      "strategy\n"
      "                   (for compute-sanitizer: scripts/gpu-sanitize.sh)\n"
      "  --random N       instead of the matrix, N specs drawn from the valid\n"
      "                   spec space, each with a strategy and shape (seeded\n"
      "                   by --seed)\n"
      "  --large          only the gdn case whose tensors exceed 2^31 "
      "elements\n"
      "                   (1 x 1048576 x 32 x 128 bf16: 33 GiB of GPU "
      "memory)\n"
      "  --large-wgmma    the same case through the wgmma scan (sm_90)\n"
      "  --list           print the selected case names and exit\n"
      "  --self-test      check the suite itself (no GPU needed) and exit\n"
      "  --threads N      CPU threads for compiling and the reference "
      "(default: all)\n"
      "  --json FILE      write every case's result to FILE\n"
      "  --seed N         vary the random inputs (default 0)\n"
      "  --device N       GPU ordinal (default 0)\n"
      "  --help           this text\n");
}

static bool parseUnsigned(const std::string &text, uint64_t limit, uint64_t &value) {
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
    } else if (arg == "--tiny" && !hasInlineValue) {
      options.tiny = true;
    } else if (arg == "--random") {
      if (!takeValue() || !parseUnsigned(value, 10000, number) || number == 0)
        return usageError("--random needs a number of specs from 1 to 10000");
      options.random = static_cast<int>(number);
    } else if (arg == "--large" && !hasInlineValue) {
      options.large = true;
    } else if (arg == "--large-wgmma" && !hasInlineValue) {
      options.large = options.largeWgmma = true;
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
  if (options.tiny + options.large + (options.random > 0) > 1)
    return usageError(
        "--tiny, --large and --random select different cases; give one");
  if (options.threads == 0)
    options.threads = std::max(1u, std::thread::hardware_concurrency());
  return -1;
}

std::vector<Case> selectCases(const Options &options) {
  std::vector<Case> selected;
  for (Case &c : options.random ? randomCases(options.random, options.seed)
                 : options.tiny ? tinyCases()
                                : allCases())
    if ((!options.quick || c.quick) &&
        c.name.find(options.filter) != std::string::npos)
      selected.push_back(std::move(c));
  return selected;
}

} // namespace lina::gpusuite
