//===- ResourceUsageTest.cpp - Every default kernel keeps its occupancy -===//
//
// Part of lina. ptxas's report of every preset's default kernels (NVRTC, no
// GPU): no spills, and registers and shared memory that leave a
// multiprocessor at least three prepare CTAs and two scan CTAs (one of a
// whole head's 16-column warps, the large-grid default), and at d128 the
// occupancy each default kernel has today (OccupancyAsMeasured). A change
// that lets the compiler take far more registers fails here instead of on
// the GPU: solves written straight to global memory once took kda's prepare
// kernel to 174 registers, one CTA per multiprocessor, 2.1x slower
// (docs/perf-notes.md).
//
//===----------------------------------------------------------------------===//
#include "CompileReport.h"

#include "lina/Codegen/KernelPlanner.h"
#include "lina/Runtime/Nvrtc.h"
#include "lina/Runtime/PtxasReport.h"
#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

using namespace lina;
using lina::test::compileWithReport;
using lina::test::Report;

namespace {

/// The CTAs of kernel `k` a multiprocessor holds by its registers and the
/// shared memory the plan gives it.
int ctasPerSM(const KernelPlan &plan, const cuda::KernelResources &k) {
  int64_t shared = k.kernel == plan.prepareKernel   ? plan.prepareSharedBytes
                   : k.kernel == plan.carryKernel   ? plan.carrySharedBytes
                   : k.kernel == plan.combineKernel ? 0
                                                    : plan.scanSharedBytes;
  return cuda::ctasPerMultiprocessor(k.registers,
                                     static_cast<int>(plan.threads), shared);
}

/// ptxas's report of `spec` planned at `schedule`: no kernel spills, and
/// with `occupancy` at least three prepare and two scan CTAs fit a
/// multiprocessor.
void expectNoSpills(const Spec &spec, const ScheduleOptions &schedule,
                    bool occupancy) {
  const cuda::Nvrtc &nvrtc = cuda::Nvrtc::get();
  if (!nvrtc.available())
    GTEST_SKIP() << nvrtc.status().message();
  Report report;
  compileWithReport(spec, schedule, report);
  if (testing::Test::HasFatalFailure())
    return;
  const KernelPlan &plan = report.plan;
  ASSERT_EQ(report.kernels.size(), (plan.prepareKernel.empty() ? 1u : 2u) +
                                       (plan.segments > 1 ? 2u : 0u))
      << report.log;
  for (const cuda::KernelResources &k : report.kernels) {
    SCOPED_TRACE(k.kernel);
    EXPECT_FALSE(k.spills()) << report.log;
    if (!occupancy)
      continue;
    // A scan whose warps each hold 16 value columns of a whole head (the
    // large-grid default) takes up to 64 registers of state a thread: the
    // delta rules' run one CTA an SM, a head each, unless the schedule asks
    // for two. The combine and carry kernels, throughput kernels, at least
    // two.
    bool wholeHeads =
        schedule.tileV == 16 * schedule.warps && !schedule.twoCTAs;
    bool segmentKernel =
        k.kernel == plan.combineKernel || k.kernel == plan.carryKernel;
    int least = k.kernel == plan.prepareKernel ? 3
                : !segmentKernel && wholeHeads ? 1
                                               : 2;
    EXPECT_GE(ctasPerSM(plan, k), least) << k.registers << " registers";
  }
}

class DefaultKernels : public ::testing::TestWithParam<std::string> {};

TEST_P(DefaultKernels, KeepTheirOccupancyWithoutSpills) {
  Spec spec = findPreset(GetParam())->spec;
  expectNoSpills(spec, defaultSchedule(spec), /*occupancy=*/true);
}

// The default for a large grid (1x8192x96x128 on 132 SMs: a whole head on
// eight warps, tv64 for linear attention, tv32 for rwkv7) too.
TEST_P(DefaultKernels, KeepTheirOccupancyOnALargeGrid) {
  Spec spec = findPreset(GetParam())->spec;
  spec.keyDim = spec.valueDim = 128;
  spec.heads = spec.valueHeads = 96;
  expectNoSpills(spec, defaultSchedule(spec, /*sequences=*/1, /*SMs=*/132),
                 /*occupancy=*/true);
}

// f16 and f32 inputs spill nowhere either (the three-CTA bound the bf16
// additive scans take once spilled 136 bytes in mamba2's f16 scan). Their
// occupancy is not held to the bf16 kernels' (rwkv7's f16 prepare kernel
// fits two CTAs).
TEST_P(DefaultKernels, SpillNothingInF16OrF32) {
  for (DType dtype : {DType::F16, DType::F32}) {
    SCOPED_TRACE(toString(dtype));
    Spec spec = findPreset(GetParam())->spec;
    spec.dtype = dtype;
    expectNoSpills(spec, defaultSchedule(spec), /*occupancy=*/false);
  }
}

// The default where the delta rules' whole heads outnumber the SMs
// (4x4096x64x128: 256 CTAs for 132, docs/perf-notes.md): their scans, ~170
// registers and one CTA an SM without the flag, ask for two and fit them
// without spilling; the prepare kernel does not change. (With 48 or 96
// value heads gdn's scan spills 24 bytes under the same bound.)
TEST(TwoCTAs, WholeHeadDeltaScansFitTwoWithoutSpills) {
  for (const char *name : {"gdn", "kda", "deltanet"}) {
    SCOPED_TRACE(name);
    Spec spec = findPreset(name)->spec;
    spec.keyDim = spec.valueDim = 128;
    spec.heads = spec.valueHeads = 64;
    ScheduleOptions schedule = defaultSchedule(spec, /*sequences=*/4, 132);
    ASSERT_EQ(schedule.tileV, 128);
    ASSERT_TRUE(schedule.twoCTAs);
    Expected<KernelPlan> plan = planChunkKernel(spec, schedule);
    ASSERT_TRUE(plan.ok()) << plan.message();
    EXPECT_NE(
        plan->source.find("__launch_bounds__(256, 2) lina_chunk_split_scan("),
        std::string::npos);
    EXPECT_NE(plan->source.find("__launch_bounds__(256) lina_chunk_prepare("),
              std::string::npos);
    expectNoSpills(spec, schedule, /*occupancy=*/true);
  }
}

// The default for few long sequences (2x16384x16x128: whole heads in eight
// segments) spills nowhere, its combine and carry kernels included.
TEST(Segments, DefaultKernelsSpillNothing) {
  for (const char *name : {"retnet", "mamba2", "gla"}) {
    SCOPED_TRACE(name);
    Spec spec = findPreset(name)->spec;
    spec.keyDim = spec.valueDim = 128;
    spec.heads = spec.valueHeads = 16;
    ScheduleOptions schedule =
        defaultSchedule(spec, /*sequences=*/2, /*SMs=*/132, /*seqLen=*/16384);
    ASSERT_EQ(schedule.segments, 8);
    expectNoSpills(spec, schedule, /*occupancy=*/true);
  }
}

// Each default kernel's occupancy (d128, the default schedule) as ptxas
// gives it today (CUDA 13.0): a guard finer than the bounds above, which let
// eea4a1b's piece arithmetic take gdn's prepare kernel from five CTAs an SM
// to four, its scan from three to two, and mamba2's prepare kernel from eight
// to six unnoticed (docs/perf-notes.md). A CUDA release
// that allocates differently fails here too: measure, then update the row.
TEST(DefaultKernels, OccupancyAsMeasured) {
  if (!cuda::Nvrtc::get().available())
    GTEST_SKIP() << cuda::Nvrtc::get().status().message();
  struct Row {
    const char *preset;
    int prepare, scan;
  };
  for (Row row : {Row{"retnet", 8, 3}, Row{"mamba2", 8, 3}, Row{"gla", 5, 3},
                  Row{"deltanet", 5, 3}, Row{"gdn", 5, 3}, Row{"kda", 4, 2},
                  Row{"rwkv7", 3, 3}, Row{"linear_attn", 8, 3}}) {
    SCOPED_TRACE(row.preset);
    Spec spec = findPreset(row.preset)->spec;
    spec.keyDim = spec.valueDim = 128;
    Report report;
    compileWithReport(spec, defaultSchedule(spec), report);
    if (HasFatalFailure())
      return;
    for (const cuda::KernelResources &k : report.kernels)
      EXPECT_GE(ctasPerSM(report.plan, k),
                k.kernel == report.plan.prepareKernel ? row.prepare : row.scan)
          << k.kernel << ": " << k.registers << " registers";
  }
}

std::vector<std::string> presetNames() {
  std::vector<std::string> names;
  for (const Preset &preset : presets())
    names.push_back(preset.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(AllPresets, DefaultKernels,
                         ::testing::ValuesIn(presetNames()),
                         [](const ::testing::TestParamInfo<std::string> &info) {
                           return info.param;
                         });

} // namespace
