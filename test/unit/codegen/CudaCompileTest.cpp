//===- CudaCompileTest.cpp - Every emitted kernel compiles --------------===//
//
// Part of lina. NVRTC runs without a GPU, so CI proves that the CUDA the code
// generator prints compiles for sm_80 and sm_90, for every preset, strategy
// and dtype, and that bad schedules are refused with a clear message.
//
//===----------------------------------------------------------------------===//
#include "lina/Codegen/KernelPlanner.h"
#include "lina/Runtime/Nvrtc.h"
#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

#include <regex>

#include <tuple>

using namespace lina;

namespace {

using CompileParam = std::tuple<std::string, Strategy, DType, std::string>;

class EveryKernelCompiles : public ::testing::TestWithParam<CompileParam> {};

TEST_P(EveryKernelCompiles, ToACubin) {
  const cuda::Nvrtc &nvrtc = cuda::Nvrtc::get();
  if (!nvrtc.available())
    GTEST_SKIP() << nvrtc.status().message();
  auto [name, strategy, dtype, arch] = GetParam();
  Spec spec = findPreset(name)->spec;
  spec.dtype = dtype;
  spec.varlen = true; // the varlen path is a superset of the batched one
  ScheduleOptions schedule = defaultSchedule(spec);
  schedule.strategy = strategy;
  Expected<KernelPlan> plan = planChunkKernel(spec, schedule);
  ASSERT_TRUE(plan.ok()) << plan.message();
  // Tensor cores for 16-bit inputs, fp32 FMA for f32 ones: the generated
  // kernels' calls say which (the prelude before them has both).
  std::string kernels =
      plan->source.substr(plan->source.find("extern \"C\" __global__"));
  // (reg_state, the register-resident state, is built on the tensor
  // cores; a product's last template flag says MMA.)
  bool usesMma =
      kernels.find("reg_state<") != std::string::npos ||
      std::regex_search(kernels, std::regex("(matmul|decay_product)<[^>]*, "
                                            "true>\\("));
  EXPECT_EQ(usesMma, dtype != DType::F32);
  cuda::CompileOptions options;
  options.arch = arch;
  Expected<cuda::CompiledKernel> compiled = nvrtc.compile(plan->source, options);
  ASSERT_TRUE(compiled.ok()) << compiled.message();
  ASSERT_GT(compiled->cubin.size(), 4u);
  EXPECT_EQ(compiled->cubin.substr(0, 4), std::string("\x7f" "ELF"));
}

INSTANTIATE_TEST_SUITE_P(
    AllPresets, EveryKernelCompiles,
    ::testing::Combine(::testing::ValuesIn(presetNames()),
                       ::testing::Values(Strategy::FusedScan,
                                         Strategy::Materialize,
                                         Strategy::Split),
                       ::testing::Values(DType::BF16, DType::F32),
                       ::testing::Values("sm_80", "sm_90")),
    [](const ::testing::TestParamInfo<CompileParam> &info) {
      return std::get<0>(info.param) + "_" +
             toString(std::get<1>(info.param)) + "_" +
             toString(std::get<2>(info.param)) + "_" + std::get<3>(info.param);
    });

/// The prefetching scans (the `prefetch` knob): every preset's kernels that
/// walk the chunks compile, and each fetches its tiles into double buffers
/// (cp.async or through registers), the next chunk's issued right after
/// this chunk's land, with no barrier at the end of a chunk; or, where
/// double buffers would cost occupancy, into single buffers through
/// registers, with one.
class PrefetchCompiles : public ::testing::TestWithParam<std::string> {};

TEST_P(PrefetchCompiles, ToACubin) {
  const cuda::Nvrtc &nvrtc = cuda::Nvrtc::get();
  if (!nvrtc.available())
    GTEST_SKIP() << nvrtc.status().message();
  Spec spec = findPreset(GetParam())->spec;
  spec.varlen = true;
  for (Strategy strategy :
       {Strategy::FusedScan, Strategy::Materialize, Strategy::Split}) {
    SCOPED_TRACE(toString(strategy));
    ScheduleOptions schedule = defaultSchedule(spec);
    schedule.strategy = strategy;
    schedule.prefetch = true;
    Expected<KernelPlan> plan = planChunkKernel(spec, schedule);
    ASSERT_TRUE(plan.ok()) << plan.message();
    const std::string &source = plan->source;
    EXPECT_TRUE(source.find("tile_copy<") != std::string::npos ||
                source.find("fetched0.commit(") != std::string::npos);
    EXPECT_NE(source.find("__syncthreads();\n    if (t0 + "),
              std::string::npos);
    EXPECT_NE(source.find("fetch_chunk(t0 + "), std::string::npos);
    // With buffer rings (always for the default split scans), a chunk's
    // last op is followed by the ring's turn, not a barrier; single-buffered
    // (where the second buffers would cost occupancy), by a barrier.
    bool doubled = source.find("  int ring = 0;\n") != std::string::npos;
    if (strategy == Strategy::Split) {
      EXPECT_TRUE(doubled);
    }
    if (doubled) {
      EXPECT_EQ(source.find("__syncthreads();\n    ring = "), std::string::npos);
      size_t turn = source.find("    ring = ring == ");
      ASSERT_NE(turn, std::string::npos);
      EXPECT_EQ(source.substr(source.find('\n', turn), 5), "\n  }\n");
    } else {
      EXPECT_NE(source.find("__syncthreads();\n  }\n"), std::string::npos);
    }
    // Without the knob the kernels load as before.
    schedule.prefetch = false;
    Expected<KernelPlan> plain = planChunkKernel(spec, schedule);
    ASSERT_TRUE(plain.ok()) << plain.message();
    EXPECT_EQ(plain->source.find("fetch_chunk"), std::string::npos);
    cuda::CompileOptions options;
    options.arch = "sm_90";
    Expected<cuda::CompiledKernel> compiled = nvrtc.compile(source, options);
    ASSERT_TRUE(compiled.ok()) << compiled.message();
    EXPECT_EQ(compiled->cubin.substr(0, 4), std::string("\x7f" "ELF"));
  }
}

INSTANTIATE_TEST_SUITE_P(AllPresets, PrefetchCompiles,
                         ::testing::ValuesIn(presetNames()));

TEST(Schedule, RejectsTilesThatDoNotFit) {
  Spec spec = findPreset("gdn")->spec;
  ScheduleOptions s = defaultSchedule(spec);
  s.tileV = 48; // does not divide 128
  Expected<KernelPlan> plan = planChunkKernel(spec, s);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.message().find("tile-v (48) must be a multiple of 8 dividing "
                                "value_dim (128)"),
            std::string::npos)
      << plan.message();

  Spec odd = spec;
  odd.keyDim = 72;
  plan = planChunkKernel(odd, defaultSchedule(odd));
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.message().find("key_dim (72) must be a multiple of 16"),
            std::string::npos)
      << plan.message();
}

TEST(Schedule, RejectsSharedMemoryOverflow) {
  Spec spec = findPreset("kda")->spec; // 128 x 128 heads
  ScheduleOptions s = defaultSchedule(spec);
  s.chunkSize = 128;
  s.tileV = 128;
  Expected<KernelPlan> plan = planChunkKernel(spec, s);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.message().find("bytes of shared memory"), std::string::npos)
      << plan.message();
}

TEST(Emitter, NoSpecTextReachesTheSource) {
  Spec spec = findPreset("gla")->spec;
  spec.name = "x\");} __global__ void evil() {//";
  Expected<KernelPlan> plan = planChunkKernel(spec, defaultSchedule(spec));
  ASSERT_TRUE(plan.ok()) << plan.message();
  EXPECT_EQ(plan->source.find("evil"), std::string::npos);
}

} // namespace
