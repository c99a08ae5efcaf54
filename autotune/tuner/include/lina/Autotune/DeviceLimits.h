//===- DeviceLimits.h - What pruning knows of a GPU -------------*- C++ -*-===//
//
// Part of lina. The limits that decide whether a candidate can run at all
// (shared memory per block, threads per block, registers per block) and how
// many of its CTAs share an SM. Plain numbers, so the tuner's logic and its
// tests need no GPU; `lina tune` fills them from cuda::Device.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_DEVICELIMITS_H
#define LINA_AUTOTUNE_DEVICELIMITS_H

#include <cstdint>
#include <string>

namespace lina {

/// Defaults are an H100/H200's.
struct DeviceLimits {
  int64_t sharedMemoryPerBlockOptin = 232448;
  int64_t sharedMemoryPerSM = 233472;
  int64_t smCount = 132;
  int64_t maxThreadsPerBlock = 1024;
  int64_t maxThreadsPerSM = 2048;
  int64_t registersPerBlock = 65536;
  int64_t registersPerSM = 65536;
  /// The wgmma scan runs on sm_90 only (KernelPlan::needsSm90a).
  std::string arch = "sm_90";
};

/// CTAs of one kernel that fit on one SM at once, limited by threads,
/// registers (allocated per warp in units of 256) and shared memory; at most
/// 32 (the hardware's block limit). 0 means the kernel cannot launch.
int64_t blocksPerSM(const DeviceLimits &limits, int64_t threads,
                    int64_t registersPerThread, int64_t sharedBytes);

/// Why a compiled kernel cannot launch (its registers per block over the
/// limit, or no CTA fits on an SM), or "" when it can.
std::string launchLimitProblem(const DeviceLimits &limits, int64_t threads,
                               int64_t registersPerThread, int64_t sharedBytes);

} // namespace lina

#endif // LINA_AUTOTUNE_DEVICELIMITS_H
