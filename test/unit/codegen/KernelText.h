//===- KernelText.h - Planning a kernel and reading its source --*- C++ -*-===//
//
// Part of lina's tests: a KernelPlan for a schedule, one kernel's text out of
// its source, and how often a call appears there.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TEST_CODEGEN_KERNELTEXT_H
#define LINA_TEST_CODEGEN_KERNELTEXT_H

#include "lina/Codegen/KernelPlanner.h"

#include <gtest/gtest.h>

#include <string>

namespace lina::test {

inline KernelPlan plan(const Spec &spec, const ScheduleOptions &schedule) {
  Expected<KernelPlan> p = planChunkKernel(spec, schedule);
  EXPECT_TRUE(p.ok()) << p.message();
  return p.ok() ? std::move(p).value() : KernelPlan();
}

/// The text of the kernel `name` of `plan`, without the prelude and the
/// other kernels.
inline std::string kernelText(const KernelPlan &plan, const std::string &name) {
  size_t begin = plan.source.find("void __launch_bounds__");
  begin = plan.source.find(name + "(", begin);
  EXPECT_NE(begin, std::string::npos) << name;
  if (begin == std::string::npos)
    return "";
  size_t end = plan.source.find("\n}\n", begin);
  return plan.source.substr(begin, end - begin);
}

/// The kernel that walks the chunks (the split scan or the fused one).
inline std::string scanKernel(const KernelPlan &plan) {
  return kernelText(plan, plan.scanKernel);
}

inline size_t count(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + what.size()))
    ++n;
  return n;
}

} // namespace lina::test

#endif // LINA_TEST_CODEGEN_KERNELTEXT_H
