//===- DeviceLimits.cpp - Occupancy from a kernel's resources ----------===//
//
// Part of lina. The arithmetic of CUDA's occupancy calculator, reduced to the
// three resources lina's kernels are limited by.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/DeviceLimits.h"

#include <algorithm>

namespace lina {

namespace {

constexpr int64_t kMaxBlocksPerSM = 32;
/// Registers are handed out per warp in blocks of 256.
constexpr int64_t kRegisterGranule = 256;
/// The driver reserves 1 KiB of shared memory per CTA (sm_80 and later).
constexpr int64_t kSharedReservedPerBlock = 1024;

int64_t warpRegisters(int64_t registersPerThread) {
  int64_t perWarp = registersPerThread * 32;
  return (perWarp + kRegisterGranule - 1) / kRegisterGranule * kRegisterGranule;
}

} // namespace

int64_t blocksPerSM(const DeviceLimits &l, int64_t threads,
                    int64_t registersPerThread, int64_t sharedBytes) {
  if (threads <= 0 || threads > l.maxThreadsPerBlock ||
      sharedBytes > l.sharedMemoryPerBlockOptin)
    return 0;
  int64_t warps = (threads + 31) / 32;
  int64_t blocks = std::min(kMaxBlocksPerSM, l.maxThreadsPerSM / (warps * 32));
  if (registersPerThread > 0) {
    int64_t perBlock = warpRegisters(registersPerThread) * warps;
    if (perBlock > l.registersPerBlock)
      return 0;
    blocks = std::min(blocks, l.registersPerSM / perBlock);
  }
  if (sharedBytes > 0)
    blocks = std::min(blocks, l.sharedMemoryPerSM /
                                  (sharedBytes + kSharedReservedPerBlock));
  return std::max<int64_t>(blocks, 0);
}

std::string launchLimitProblem(const DeviceLimits &l, int64_t threads,
                               int64_t registersPerThread,
                               int64_t sharedBytes) {
  int64_t warps = (threads + 31) / 32;
  if (registersPerThread > 0 &&
      warpRegisters(registersPerThread) * warps > l.registersPerBlock)
    return "needs " + std::to_string(registersPerThread) +
           " registers per thread x " + std::to_string(threads) +
           " threads; the device allows " +
           std::to_string(l.registersPerBlock) + " per block";
  if (blocksPerSM(l, threads, registersPerThread, sharedBytes) == 0)
    return "no CTA fits on an SM (" + std::to_string(threads) + " threads, " +
           std::to_string(registersPerThread) + " registers per thread, " +
           std::to_string(sharedBytes) + " bytes of shared memory)";
  return "";
}

} // namespace lina
