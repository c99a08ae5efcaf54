//===- SuiteLarge.h - --large: tensors past 2^31 elements -------*- C++ -*-===//
//
// Part of lina. The one case too large for the suite's regular path (see
// SuiteLarge.cpp); the helpers are exposed for --self-test, which checks on
// the CPU that the per-head reference problems read the same numbers as the
// device tensors.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TEST_GPU_SUITELARGE_H
#define LINA_TEST_GPU_SUITELARGE_H

#include "Suite.h"

namespace lina::gpusuite {

struct LargeShape {
  int64_t seqLen = int64_t(1) << 20; ///< B = 1
  int64_t heads = 32;                ///< H = HV
  int64_t dim = 128;                 ///< K = V
  /// Value heads checked against the float64 reference.
  std::vector<int64_t> sampledHeads = {0, 17, 31};
  /// Output tokens compared: the first and the last ones.
  int64_t headWindow = 1024, tailWindow = 4096;
};

Spec largeSpec(const LargeShape &shape);
std::string largeName(const LargeShape &shape);
/// Value head \p hv alone (H = HV = 1), with exactly the device's inputs.
reference::Problem largeHeadProblem(const LargeShape &shape, int64_t hv);
/// A whole input tensor in the device layout, as doubles (small shapes
/// only): 1 q, 2 k, 3 v, 4 g, 5 beta, 6 initial state.
std::vector<double> largeDeviceLayout(const LargeShape &shape, int tensor);

/// --self-test's part: on a small shape, every per-head problem holds the
/// device tensors' values at the right places; the real shape needs 64-bit
/// indexing. "" when it holds.
std::string largeSelfTest();

/// Runs the case on GPU options.device; \p whyNoGpu non-empty skips (77).
/// \p running names the case while its kernel runs, for the signal handler.
int runLarge(const Options &options, const std::string &whyNoGpu,
             std::atomic<const char *> &running);

} // namespace lina::gpusuite

#endif // LINA_TEST_GPU_SUITELARGE_H
