//===- Emulation.h - lina's kernels run on the CPU --------------*- C++ -*-===//
//
// Part of lina. With LINA_EMULATE_GPU=sm_90 (or sm_80) in the environment,
// the driver and NVRTC are stood in for by the host: a kernel's CUDA source
// is compiled by the host C++ compiler with EmulatedDevice.cuh in front of
// it, "device" memory is host memory, and a launch runs every CTA's threads
// as fibers on the calling thread. The device it reports is an H200 (sm_90)
// or an A100 (sm_80) in everything the planner reads (SMs, shared memory,
// registers), so a call plans the kernels it would plan there and runs them
// as written, slowly. Timings mean nothing; results are the kernels'.
//
// What it is for: checking the generated kernels (forward and backward)
// against the float64 reference on a machine without a GPU, in CI: the
// generated kernels, the decode kernels and the Hopper wgmma scans (their
// warpgroup products, TMA copies, mbarriers and named barriers are
// emulated for sm_90a sources). The persistent kernel cache is off.
//
// The host compiler is $LINA_EMULATION_CXX, else $CXX, else c++.
// LINA_EMULATION_ORDER=reverse runs each step's threads from the last
// (docs/testing.md: a race gives other results in the other order).
//
//===----------------------------------------------------------------------===//
#ifndef LINA_RUNTIME_EMULATION_H
#define LINA_RUNTIME_EMULATION_H

#include "lina/Runtime/Nvrtc.h"
#include "lina/Runtime/Status.h"

#include <string>

namespace lina::cuda {
class Driver;
}

namespace lina::cuda::emulation {

/// How an emulated image starts: these eight bytes, then the shared
/// object's size (8 bytes, host order), then the shared object.
inline constexpr char kImageMagic[8] = {'L', 'I', 'N', 'A', 'E', 'M', 'U', '1'};

/// The GPU an emulated device reports.
struct EmulatedGpu {
  std::string name;
  int computeMajor = 9, computeMinor = 0;
  int smCount = 132;
  int sharedPerBlock = 48 * 1024;
  int sharedPerBlockOptin = 227 * 1024;
  int sharedPerSM = 228 * 1024;
  int registersPerSM = 64 * 1024;
  int maxThreadsPerSM = 2048;
};

/// Whether LINA_EMULATE_GPU asks for the emulated device (read once).
bool enabled();
/// The device it asks for, or why its value names none.
Expected<EmulatedGpu> requestedGpu();

/// The host compiler and the device library it compiles in front of every
/// kernel: what an emulated compile's output depends on besides the
/// kernel's source and options.
std::string compilerIdentity();

/// Fills \p driver's table with the emulated device's entry points.
Status installDriver(Driver &driver);

/// Compiles \p source for the emulated device: its image (a host shared
/// object behind a short header) in CompiledKernel::cubin.
Expected<CompiledKernel> compile(const std::string &source,
                                 const CompileOptions &options);

/// The text put before a kernel's source (EmulatedDevice.cuh, then
/// EmulatedHopper.cuh).
const char *deviceLibrarySource();

} // namespace lina::cuda::emulation

#endif // LINA_RUNTIME_EMULATION_H
