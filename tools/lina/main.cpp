//===- main.cpp - The lina command-line tool ---------------------------===//
//
// Part of lina. `lina <command> [options]`; see `lina --help`.
//
//===----------------------------------------------------------------------===//
#include "CommandLine.h"
#include "Commands.h"

#include "lina/Autotune/CacheKeys.h"

#include <cstdio>
#include <cstring>
#include <exception>

using namespace lina::cli;

namespace {

struct Command {
  const char *name;
  const char *summary;
  int (*run)(const std::vector<std::string> &);
};

const Command kCommands[] = {
    {"presets", "list the built-in recurrences, one line each", presetsCommand},
    {"spec", "print a preset's spec as MLIR, with dims and dtype overridden",
     specCommand},
    {"compile", "compile a spec to scheduled MLIR, CUDA C++, PTX or a cubin",
     compileCommand},
    {"tune", "find the fastest schedule for a spec at a shape on this GPU "
             "(--dry-run: list the candidates)",
     tuneCommand},
    {"cache", "list, show, clear, export or import the cache of cubins and "
              "tuning results",
     cacheCommand},
    {"run", "run a spec's chunkwise algorithm on random inputs and check it "
            "against the float64 reference",
     runCommand},
    {"version", "print lina's version and the LLVM/MLIR and NVRTC it uses "
                "(also 'lina --version')",
     versionCommand},
};

void printUsage(FILE *out) {
  std::fprintf(out,
               "usage: lina <command> [options]\n\n"
               "lina %s compiles linear-attention recurrences into chunkwise "
               "kernels.\n\ncommands:\n",
               lina::cache::linaVersion());
  for (const Command &c : kCommands)
    std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
  std::fputs("\n'lina <command> --help' describes each command; "
             "'lina --version' prints the versions.\n",
             out);
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    printUsage(stderr);
    return 2;
  }
  std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    printUsage(stdout);
    return 0;
  }
  if (name == "--version")
    name = "version";
  std::vector<std::string> args(argv + 2, argv + argc);
  for (const Command &c : kCommands) {
    if (name != c.name)
      continue;
    try {
      return c.run(args);
    } catch (const UsageError &e) {
      std::fprintf(stderr, "lina %s: error: %s\n", c.name, e.what());
      return 2;
    } catch (const std::exception &e) {
      std::fprintf(stderr, "lina %s: error: %s\n", c.name, e.what());
      return 1;
    }
  }
  std::fprintf(stderr,
               "lina: error: unknown command '%s' (see 'lina --help')\n",
               name.c_str());
  return 2;
}
