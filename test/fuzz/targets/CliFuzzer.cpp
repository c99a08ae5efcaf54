//===- CliFuzzer.cpp - The lina CLI's argument parser, under libFuzzer -===//
//
// Part of lina. The input is split at NUL bytes into arguments for `lina
// spec`, `lina compile --emit mlir` and `lina run` (on tiny shapes). Each must
// return an exit code or throw the CLI's UsageError / runtime_error: never
// crash, never abort.
//
//===----------------------------------------------------------------------===//
#include "CommandLine.h"
#include "Commands.h"

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  // The commands print specs and kernels; keep the fuzzer's output readable.
  if (!std::freopen("/dev/null", "w", stdout))
    return 0;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<std::string> args;
  std::string current;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      args.push_back(current);
      current.clear();
    } else {
      current.push_back(static_cast<char>(data[i]));
    }
  }
  args.push_back(current);
  if (args.size() > 12)
    return 0;
  std::string command = args.front();
  args.erase(args.begin());
  // `lina run` replays the recurrence on the CPU: bound its size.
  for (const std::string &a : args)
    if (a.size() > 40)
      return 0;
  try {
    if (command == "spec")
      lina::cli::specCommand(args);
    else if (command == "presets")
      lina::cli::presetsCommand(args);
    else if (command == "compile") {
      args.push_back("--emit");
      args.push_back("mlir");
      lina::cli::compileCommand(args);
    } else if (command == "run") {
      args.insert(args.begin(), {"--dk", "16", "--dv", "16"});
      args.push_back("--shape");
      args.push_back("1,9,1");
      lina::cli::runCommand(args);
    }
  } catch (const lina::cli::UsageError &) {
  } catch (const std::runtime_error &) {
  }
  return 0;
}
