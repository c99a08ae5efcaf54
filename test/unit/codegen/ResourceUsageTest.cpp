//===- ResourceUsageTest.cpp - Every default kernel keeps its occupancy -===//
//
// Part of lina. ptxas's report of every preset's default kernels (NVRTC, no
// GPU): no spills, and registers and shared memory that leave a
// multiprocessor at least three prepare CTAs and two scan CTAs (one of a
// whole head's 16-column warps, the large-grid default). A change
// that lets the compiler take far more registers fails here instead of on
// the GPU: solves written straight to global memory once took kda's prepare
// kernel to 174 registers, one CTA per multiprocessor, 2.1x slower
// (docs/perf-notes.md, eighth session).
//
//===----------------------------------------------------------------------===//
#include "lina/Codegen/KernelPlanner.h"
#include "lina/Runtime/Nvrtc.h"
#include "lina/Runtime/PtxasReport.h"
#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

using namespace lina;

namespace {

/// ptxas's report of `spec` planned at `schedule`: no kernel spills, and
/// with `occupancy` at least three prepare and two scan CTAs fit a
/// multiprocessor.
void expectNoSpills(const Spec &spec, const ScheduleOptions &schedule,
                    bool occupancy) {
  const cuda::Nvrtc &nvrtc = cuda::Nvrtc::get();
  if (!nvrtc.available())
    GTEST_SKIP() << nvrtc.status().message();
  Expected<KernelPlan> plan = planChunkKernel(spec, schedule);
  ASSERT_TRUE(plan.ok()) << plan.message();
  cuda::CompileOptions options;
  options.arch = "sm_90";
  options.flags.push_back(cuda::kPtxasVerbose);
  Expected<cuda::CompiledKernel> compiled =
      nvrtc.compile(plan->source, options);
  ASSERT_TRUE(compiled.ok()) << compiled.message();
  std::vector<cuda::KernelResources> kernels =
      cuda::parsePtxasReport(compiled->log);
  ASSERT_EQ(kernels.size(), (plan->prepareKernel.empty() ? 1u : 2u) +
                                (plan->segments > 1 ? 2u : 0u))
      << compiled->log;
  for (const cuda::KernelResources &k : kernels) {
    SCOPED_TRACE(k.kernel);
    EXPECT_FALSE(k.spills()) << compiled->log;
    if (!occupancy)
      continue;
    if (k.kernel == plan->combineKernel || k.kernel == plan->carryKernel) {
      // Throughput kernels: at least two CTAs an SM.
      int64_t shared =
          k.kernel == plan->carryKernel ? plan->carrySharedBytes : 0;
      EXPECT_GE(cuda::ctasPerMultiprocessor(
                    k.registers, static_cast<int>(plan->threads), shared),
                2)
          << k.registers << " registers";
      continue;
    }
    bool prepare = k.kernel == plan->prepareKernel;
    int64_t shared =
        prepare ? plan->prepareSharedBytes : plan->scanSharedBytes;
    // A scan whose warps each hold 16 value columns of a whole head (the
    // large-grid default) takes up to 64 registers of state a thread: the
    // delta rules' run one CTA an SM, a head each, unless the schedule asks
    // for two.
    bool wholeHeads = schedule.tileV == 16 * schedule.warps && !schedule.twoCTAs;
    EXPECT_GE(cuda::ctasPerMultiprocessor(
                  k.registers, static_cast<int>(plan->threads), shared),
              prepare ? 3 : wholeHeads ? 1 : 2)
        << k.registers << " registers, " << shared << " bytes of shared memory";
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
    EXPECT_NE(plan->source.find(
                  "__launch_bounds__(256, 2) lina_chunk_split_scan("),
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
