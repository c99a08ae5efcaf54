//===- RunReport.h - What `lina run` prints ---------------------*- C++ -*-===//
//
// Part of lina. The forward check's findings, either as the human lines,
// printed as they come, or (--json) as one JSON object printed at the end:
// {"spec", "shape", "device", "timing", "errors", "pass"}. The run itself
// only hands its findings over, so the two forms cannot tell different
// stories.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TOOLS_RUNREPORT_H
#define LINA_TOOLS_RUNREPORT_H

#include "SpecSource.h"

#include "lina/Autotune/KernelLoader.h"
#include "lina/Runtime/Device.h"

#include "llvm/Support/JSON.h"

#include <optional>
#include <vector>

namespace lina::cli {

/// The GPU run's facts, for the device, schedule, cache and time lines.
struct GpuRunFacts {
  const cuda::Device &device;
  const KernelPlan &plan;
  const LoadReport &load;
  double launchMs;  ///< the first call's launch and wait
  double startupMs; ///< the process's start-up before `lina run` began
  double medianMs;
  int repeats;
};

class RunReport {
public:
  explicit RunReport(bool json) : json(json) {}

  void spec(const Spec &spec);
  /// `cuSeqlens` empty unless packed (varlen).
  void shape(const ProblemShape &shape, const Spec &spec,
             const std::vector<int64_t> &cuSeqlens);
  /// The float64 CPU executor's run of the chunked program, whose update
  /// after lina-specialize is `compiled`.
  void cpuDevice(int64_t chunkSize, UpdateRule compiled);
  void gpuDevice(const GpuRunFacts &facts);
  /// Relative errors against the float64 reference; `state` is none when
  /// the spec keeps no final state.
  void errors(double output, std::optional<double> state, double tolerance,
              bool onGpu);

  /// Ends the report with the verdict (PASS or FAIL, or "pass" in the JSON)
  /// and gives the exit code.
  int verdict(bool pass);
  /// Ends a GPU run that only timed: no errors, no verdict.
  int timed();
  /// Ends a run whose float64 reference overflowed (the error on stderr):
  /// there is no error to measure, and the verdict is FAIL.
  int referenceOverflowed();

private:
  int finish(std::optional<bool> pass);

  bool json;
  llvm::json::Object object;
};

} // namespace lina::cli

#endif // LINA_TOOLS_RUNREPORT_H
