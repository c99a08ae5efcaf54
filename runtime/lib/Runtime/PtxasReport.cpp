//===- PtxasReport.cpp - Registers and spills from ptxas's report ------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Runtime/PtxasReport.h"

#include <algorithm>
#include <regex>
#include <sstream>

namespace lina::cuda {

std::vector<KernelResources> parsePtxasReport(const std::string &log) {
  static const std::regex entry(R"(Compiling entry function '([^']+)')");
  static const std::regex frame(
      R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex used(R"(Used (\d+) registers)");
  std::vector<KernelResources> kernels;
  std::istringstream lines(log);
  std::string line;
  std::smatch m;
  while (std::getline(lines, line)) {
    if (std::regex_search(line, m, entry)) {
      kernels.push_back(KernelResources{m[1].str()});
      continue;
    }
    if (kernels.empty())
      continue;
    KernelResources &k = kernels.back();
    if (std::regex_search(line, m, frame)) {
      k.stackBytes = std::stoi(m[1].str());
      k.spillStoreBytes = std::stoi(m[2].str());
      k.spillLoadBytes = std::stoi(m[3].str());
    } else if (std::regex_search(line, m, used)) {
      k.registers = std::stoi(m[1].str());
    }
  }
  return kernels;
}

int ctasPerMultiprocessor(int registers, int threads, long long sharedBytes) {
  constexpr int kRegisters = 65536, kThreads = 2048, kMaxCtas = 32;
  constexpr long long kShared = 233472, kReservedPerCta = 1024;
  int warps = (threads + 31) / 32;
  // Registers go to warps in units of 256 (8 a thread).
  int perWarp = (std::max(registers, 1) * 32 + 255) / 256 * 256;
  int byRegisters = kRegisters / (perWarp * warps);
  long long byShared = kShared / (sharedBytes + kReservedPerCta);
  int byThreads = kThreads / std::max(threads, 1);
  return std::max(0, static_cast<int>(std::min<long long>(
                         {byRegisters, byShared, byThreads, kMaxCtas})));
}

} // namespace lina::cuda
