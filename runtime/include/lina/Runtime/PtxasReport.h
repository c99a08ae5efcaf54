//===- PtxasReport.h - Registers and spills from ptxas's report --*- C++ -*-===//
//
// Part of lina. What ptxas says of each kernel when NVRTC compiles with
// kPtxasVerbose: the registers a thread takes and the bytes it spills. A
// kernel's registers decide how many CTAs share a multiprocessor, so a change
// that lets the compiler hoist too much into registers (a prepare kernel once
// went from 63 to 174, an eighth of the occupancy: docs/perf-notes.md) shows
// here, on the build machine, before any GPU time is spent.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_RUNTIME_PTXASREPORT_H
#define LINA_RUNTIME_PTXASREPORT_H

#include <string>
#include <vector>

namespace lina::cuda {

/// The NVRTC option that makes ptxas report each kernel in the log.
inline constexpr const char *kPtxasVerbose = "--ptxas-options=-v";

struct KernelResources {
  std::string kernel;
  int registers = -1; ///< -1 when the report does not say
  int stackBytes = 0, spillStoreBytes = 0, spillLoadBytes = 0;
  bool spills() const { return spillStoreBytes > 0 || spillLoadBytes > 0; }
};

/// One entry per "Compiling entry function" of the log, in its order;
/// empty for a log without a report.
std::vector<KernelResources> parsePtxasReport(const std::string &log);

/// How many CTAs of `threads` threads fit on an sm_90 multiprocessor by
/// registers (64K, allocated per warp in units of 256), by shared memory
/// (228 KiB, 1 KiB of it reserved per CTA) and by threads (2048), whichever
/// is fewest; at most 32.
int ctasPerMultiprocessor(int registers, int threads, long long sharedBytes);

} // namespace lina::cuda

#endif // LINA_RUNTIME_PTXASREPORT_H
