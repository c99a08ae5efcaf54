//===- CompileReport.h - A plan compiled with ptxas's report ----*- C++ -*-===//
//
// Part of lina's tests: a spec planned at a schedule and compiled by NVRTC
// for an sm_90 GPU (sm_90a where the plan needs it, as the runtime does),
// with ptxas's per-kernel report of registers and spills.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TEST_CODEGEN_COMPILEREPORT_H
#define LINA_TEST_CODEGEN_COMPILEREPORT_H

#include "lina/Codegen/KernelPlanner.h"
#include "lina/Runtime/Nvrtc.h"
#include "lina/Runtime/PtxasReport.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace lina::test {

/// A plan and ptxas's report of its kernels.
struct Report {
  KernelPlan plan;
  std::string log;
  std::vector<cuda::KernelResources> kernels;
};

/// `spec` planned at `schedule` and compiled into `report`.
inline void compileWithReport(const Spec &spec, const ScheduleOptions &schedule,
                              Report &report) {
  Expected<KernelPlan> plan = planChunkKernel(spec, schedule);
  ASSERT_TRUE(plan.ok()) << plan.message();
  cuda::CompileOptions options;
  options.arch = kernelArch(*plan, "sm_90");
  options.flags.push_back(cuda::kPtxasVerbose);
  Expected<cuda::CompiledKernel> compiled =
      cuda::Nvrtc::get().compile(plan->source, options);
  ASSERT_TRUE(compiled.ok()) << compiled.message();
  report = {*plan, compiled->log, cuda::parsePtxasReport(compiled->log)};
}

} // namespace lina::test

#endif // LINA_TEST_CODEGEN_COMPILEREPORT_H
