//===- DecodePlanTest.cpp - Decode kernels compile; bad calls are named -===//
//
// Part of lina. Without a GPU: every preset's decode kernels planned and
// compiled with NVRTC for sm_80 and sm_90 (skipped without NVRTC); the
// printed constants are the ones the CPU emulation ran; specialization goes
// through the dialect; planner and argument errors say what to fix.
//
//===----------------------------------------------------------------------===//
#include "DecodePresetCodes.h"

#include "lina/Codegen/DecodePlanner.h"
#include "lina/Runtime/Nvrtc.h"
#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

#include <tuple>

using namespace lina;
using lina::decodetest::kPresetCodes;

namespace {

std::string planError(const Spec &spec, const DecodeSchedule &schedule = {}) {
  Expected<DecodePlan> plan = planDecodeKernel(spec, schedule);
  return plan.ok() ? "" : plan.message();
}

using CompileParam = std::tuple<std::string, DType, std::string>;
class EveryDecodeKernelCompiles
    : public ::testing::TestWithParam<CompileParam> {};

TEST_P(EveryDecodeKernelCompiles, ToACubin) {
  const cuda::Nvrtc &nvrtc = cuda::Nvrtc::get();
  if (!nvrtc.available())
    GTEST_SKIP() << nvrtc.status().message();
  auto [name, dtype, arch] = GetParam();
  Spec spec = findPreset(name)->spec; // K = V = 128
  spec.dtype = dtype;
  spec.heads = 4;
  spec.valueHeads = 8; // grouped value heads
  Expected<DecodePlan> plan = planDecodeKernel(spec);
  ASSERT_TRUE(plan.ok()) << plan.message();
  EXPECT_EQ(plan->warpColumns, (std::vector<int64_t>{4, 8, 16}));
  cuda::CompileOptions options;
  options.arch = arch;
  Expected<cuda::CompiledKernel> compiled =
      nvrtc.compile(plan->source, options);
  ASSERT_TRUE(compiled.ok()) << compiled.message();
  ASSERT_GT(compiled->cubin.size(), 4u);
  EXPECT_EQ(compiled->cubin.substr(0, 4), std::string("\x7f"
                                                      "ELF"));
  for (const std::string &kernel : plan->kernelNames) {
    EXPECT_NE(compiled->cubin.find(kernel), std::string::npos) << kernel;
    // The twin for [V, K] states (vLLM's pool order).
    EXPECT_NE(compiled->cubin.find(kernel + kDecodeVFirstSuffix),
              std::string::npos)
        << kernel;
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllPresets, EveryDecodeKernelCompiles,
    ::testing::Combine(::testing::ValuesIn(presetNames()),
                       ::testing::Values(DType::BF16, DType::F32),
                       ::testing::Values("sm_80", "sm_90")),
    [](const ::testing::TestParamInfo<CompileParam> &info) {
      return std::get<0>(info.param) + "_" + toString(std::get<1>(info.param)) +
             "_" + std::get<2>(info.param);
    });

TEST(DecodePlan, HalfPrecisionAndComputedGatesCompile) {
  const cuda::Nvrtc &nvrtc = cuda::Nvrtc::get();
  if (!nvrtc.available())
    GTEST_SKIP() << nvrtc.status().message();
  Spec spec = findPreset("kda")->spec;
  spec.dtype = DType::F16;
  spec.gate = GateSource::LowerBound;
  spec.gateLowerBound = -5.0;
  spec.beta = BetaSource::TwoSigmoid;
  Expected<DecodePlan> plan = planDecodeKernel(spec, {16, 2});
  ASSERT_TRUE(plan.ok()) << plan.message();
  EXPECT_EQ(plan->kernelNames, (std::vector<std::string>{"lina_decode_w16"}));
  cuda::CompileOptions options;
  options.arch = "sm_90";
  Expected<cuda::CompiledKernel> compiled =
      nvrtc.compile(plan->source, options);
  ASSERT_TRUE(compiled.ok()) << compiled.message();
}

TEST(DecodePlan, PrintsThePresetCodesTheEmulationRan) {
  for (const auto &codes : kPresetCodes) {
    SCOPED_TRACE(codes.preset);
    Spec spec = findPreset(codes.preset)->spec;
    spec.keyDim = spec.valueDim = 16;
    Expected<DecodePlan> plan = planDecodeKernel(spec);
    ASSERT_TRUE(plan.ok()) << plan.message();
    auto line = [](const char *a, int x, const char *b, int y, const char *c,
                   int z) {
      return std::string(a) + " = " + std::to_string(x) + ", " + b + " = " +
             std::to_string(y) + ", " + c + " = " + std::to_string(z);
    };
    const std::string &src = plan->source;
    EXPECT_NE(src.find(line("DECAY", codes.decay, "UPDATE", codes.update,
                            "GATE", codes.gate) +
                       ", BETA = " + std::to_string(codes.beta) + ";"),
              std::string::npos);
    EXPECT_NE(src.find(line("LOW_RANK_A", codes.lowRankA, "LOW_RANK_B",
                            codes.lowRankB, "WRITE", codes.write) +
                       ";"),
              std::string::npos);
    EXPECT_NE(
        src.find(std::string("QK_L2NORM = ") + (codes.l2 ? "true" : "false")),
        std::string::npos);
    EXPECT_NE(src.find("K = 16, V = 16, H = 16, HV = 16;"), std::string::npos);
    EXPECT_NE(src.find("SCALE = 2.500000000e-01f"), std::string::npos);
  }
}

TEST(DecodePlan, SpecializesThroughTheDialect) {
  // dplr with a = -(exp(g) . k), b = beta k and a beta write is the delta
  // rule: the planner decodes it as one (a single k^T S read).
  Spec spec = findPreset("rwkv7")->spec;
  spec.lowRankA = LowRankSource::NegDecayedKey;
  spec.lowRankB = LowRankSource::BetaKey;
  spec.write = WriteWeight::Beta;
  spec.beta = BetaSource::Given;
  Expected<DecodePlan> plan = planDecodeKernel(spec);
  ASSERT_TRUE(plan.ok()) << plan.message();
  EXPECT_EQ(plan->spec.update, UpdateRule::Delta);
  EXPECT_NE(plan->source.find("UPDATE = 1, GATE"), std::string::npos);
}

TEST(DecodePlan, RefusesWhatItCannotRunWithTheFix) {
  Spec spec = findPreset("gdn")->spec;
  Spec varlen = spec;
  varlen.varlen = true;
  EXPECT_NE(planError(varlen).find("set varlen = false"), std::string::npos);
  Spec odd = spec;
  odd.valueDim = 30;
  EXPECT_NE(planError(odd).find("value_dim (30) must be a multiple of 4"),
            std::string::npos);
  Spec wide = spec;
  wide.keyDim = 1024;
  EXPECT_NE(planError(wide).find("key_dim (1024) must be at most 512"),
            std::string::npos);
  Spec k256 = spec;
  k256.keyDim = 256;
  EXPECT_NE(planError(k256, {16, 0}).find("choose one of 4, 8 (or 0"),
            std::string::npos)
      << planError(k256, {16, 0});
  EXPECT_NE(planError(spec, {32, 0}).find("choose one of 4, 8, 16"),
            std::string::npos);
  EXPECT_NE(planError(spec, {0, 9}).find("warps per CTA must be 1 to 8"),
            std::string::npos);
  Spec bad = spec;
  bad.valueHeads = 3; // not a multiple of heads
  EXPECT_NE(planError(bad).find("invalid spec"), std::string::npos);
}

TEST(DecodePlan, NoSpecTextReachesTheSource) {
  Spec spec = findPreset("gla")->spec;
  spec.name = "x\");} __global__ void evil() {//";
  Expected<DecodePlan> plan = planDecodeKernel(spec);
  ASSERT_TRUE(plan.ok()) << plan.message();
  EXPECT_EQ(plan->source.find("evil"), std::string::npos);
}

TEST(DecodeSchedule, WideWarpsTheirCTAsByTheBatch) {
  Spec spec = findPreset("gdn")->spec;
  spec.heads = spec.valueHeads = 32;
  std::vector<int64_t> all = decodeWarpColumnChoices(spec);
  ASSERT_EQ(all, (std::vector<int64_t>{4, 8, 16}));
  auto is = [](DecodeSchedule s, int64_t width, int64_t warps) {
    return s.warpColumns == width && s.warps == warps;
  };
  // 32, 1024 and 8192 (sequence, head) pairs.
  EXPECT_TRUE(is(defaultDecodeSchedule(spec, 1, all), 16, 2));
  EXPECT_TRUE(is(defaultDecodeSchedule(spec, 32, all), 16, 2));
  EXPECT_TRUE(is(defaultDecodeSchedule(spec, 64, all), 16, 2));
  EXPECT_TRUE(is(defaultDecodeSchedule(spec, 65, all), 16, 4));
  EXPECT_TRUE(is(defaultDecodeSchedule(spec, 256, all), 16, 4));
  Spec dplr = findPreset("rwkv7")->spec;
  dplr.heads = dplr.valueHeads = 32;
  EXPECT_TRUE(is(defaultDecodeSchedule(dplr, 1, all), 8, 2)); // registers
  EXPECT_TRUE(is(defaultDecodeSchedule(dplr, 256, all), 8, 4));
  // K = 256 allows 8 columns at most (64 state floats per lane).
  spec.keyDim = 256;
  std::vector<int64_t> narrow = decodeWarpColumnChoices(spec);
  ASSERT_EQ(narrow, (std::vector<int64_t>{4, 8}));
  EXPECT_TRUE(is(defaultDecodeSchedule(spec, 256, narrow), 8, 4));
  EXPECT_EQ(defaultDecodeSchedule(spec, 1, {}).warpColumns, 0);
}

TEST(DecodeSchedule, TheTunersSpacePlansEverywhere) {
  Spec spec = findPreset("kda")->spec;
  spec.keyDim = 256; // widths 4 and 8 only
  std::vector<DecodeSchedule> space = decodeScheduleSpace(spec);
  ASSERT_EQ(space.size(), 8u);
  for (const DecodeSchedule &s : space) {
    Expected<DecodePlan> plan = planDecodeKernel(spec, s);
    ASSERT_TRUE(plan.ok()) << s.warpColumns << "x" << s.warps << ": "
                           << plan.message();
    EXPECT_EQ(plan->warpColumns, std::vector<int64_t>{s.warpColumns});
  }
}

//===----------------------------------------------------------------------===//
// Argument checks (DecodeKernel::forward runs exactly these first)
//===----------------------------------------------------------------------===//

void *fake(uintptr_t address) { return reinterpret_cast<void *>(address); }

class DecodeArgsTest : public ::testing::Test {
protected:
  void SetUp() override {
    Spec spec = findPreset("gdn")->spec; // bf16, g and beta
    Expected<DecodePlan> p = planDecodeKernel(spec);
    ASSERT_TRUE(p.ok()) << p.message();
    plan = *p;
    args.q = args.k = args.v = fake(0x10000);
    args.o = fake(0x20000);
    args.g = static_cast<const float *>(fake(0x30000));
    args.beta = static_cast<const float *>(fake(0x40000));
    args.batch = 4;
    args.seqLen = 1;
    args.state = static_cast<float *>(fake(0x50000));
    args.stateIndices = static_cast<const int32_t *>(fake(0x60000));
    args.numSlots = 8;
  }
  std::string problem() { return checkDecodeArgs(plan, args); }

  DecodePlan plan;
  DecodeArgs args;
};

TEST_F(DecodeArgsTest, AGoodCallPasses) { EXPECT_EQ(problem(), ""); }

TEST_F(DecodeArgsTest, MissingAndStrayTensors) {
  args.q = nullptr;
  EXPECT_EQ(problem(), "'q' is required: [B, T, H, K]");
  args.q = fake(0x10000);
  args.g = nullptr;
  EXPECT_NE(problem().find("'g' is required"), std::string::npos);
  args.g = static_cast<const float *>(fake(0x30000));
  args.a = fake(0x70000);
  EXPECT_NE(problem().find("'a' was given but the spec does not use it"),
            std::string::npos);
  args.a = nullptr;
  args.gateDtBias = static_cast<const float *>(fake(0x70000));
  EXPECT_NE(problem().find("the gate is not computed in the kernel"),
            std::string::npos);
}

TEST_F(DecodeArgsTest, AlignmentOfVectorAccesses) {
  args.v = fake(0x10002); // 4 bf16 columns are read as 8 bytes
  EXPECT_NE(problem().find("'v' is not aligned to 8 bytes"), std::string::npos);
  args.v = fake(0x10000);
  args.state = static_cast<float *>(fake(0x50008));
  EXPECT_NE(problem().find("'state' is not aligned to 16 bytes"),
            std::string::npos);
}

TEST_F(DecodeArgsTest, TokensPerCall) {
  args.seqLen = 0;
  EXPECT_NE(problem().find("1 to 16 tokens per sequence, got seqLen 0"),
            std::string::npos);
  args.seqLen = 17;
  EXPECT_NE(problem().find("chunk kernel (prefill)"), std::string::npos);
  args.seqLen = 16;
  EXPECT_EQ(problem(), "");
  args.batch = 0;
  EXPECT_NE(problem().find("batch must be at least 1"), std::string::npos);
}

TEST_F(DecodeArgsTest, StateForms) {
  args.initialState = static_cast<const float *>(fake(0x80000));
  EXPECT_NE(problem().find("not both"), std::string::npos);
  args.initialState = nullptr;
  args.stateIndices = nullptr;
  EXPECT_NE(problem().find("'stateIndices' is required: int32 [B]"),
            std::string::npos);
  args.stateIndices = static_cast<const int32_t *>(fake(0x60000));
  args.numSlots = 0;
  EXPECT_NE(problem().find("numSlots must be 1 to 2^31 - 1"),
            std::string::npos);
  args.numSlots = 8;
  args.numAcceptedTokens = static_cast<const int32_t *>(fake(0x90000));
  EXPECT_NE(problem().find("needs per-token state indices"), std::string::npos);
  args.indicesPerToken = true;
  EXPECT_EQ(problem(), "");
  args.numAcceptedTokens = nullptr; // optional: one accepted token
  EXPECT_EQ(problem(), "");

  // fla's form: no pool, so no indices.
  args.state = nullptr;
  EXPECT_NE(problem().find("give 'state' [numSlots, HV, K, V] too"),
            std::string::npos);
  args.stateIndices = nullptr;
  args.indicesPerToken = false;
  EXPECT_NE(problem().find("'numSlots' was given without"), std::string::npos);
  args.numSlots = 0;
  EXPECT_EQ(problem(), ""); // no state at all: start from zero, keep nothing
  args.finalState = static_cast<float *>(fake(0xA0004));
  EXPECT_NE(problem().find("'finalState' is not aligned to 16 bytes"),
            std::string::npos);
}

} // namespace

namespace {

TEST_F(DecodeArgsTest, PackedTokens) {
  args.cuSeqlens = fake(0xB0002);
  EXPECT_EQ(problem(), "'cuSeqlens' is not aligned to 4 bytes (int32 "
                       "[batch + 1])");
  args.cuSeqlens = fake(0xB0004);
  EXPECT_EQ(problem(), "");
  args.cuSeqlensInt64 = true;
  EXPECT_NE(problem().find("'cuSeqlens' is not aligned to 8 bytes (int64"),
            std::string::npos);
  args.cuSeqlens = nullptr;
  EXPECT_EQ(problem(), "'cuSeqlensInt64' was given without 'cuSeqlens'");
}

TEST_F(DecodeArgsTest, IntermediateStatesAndDisabledUpdates) {
  args.seqLen = 4;
  args.intermediateStates = static_cast<float *>(fake(0xC0000));
  EXPECT_NE(problem().find("numIntermediate must be 1 to 2^31 - 1"),
            std::string::npos);
  args.numIntermediate = 8;
  args.intermediateSteps = 3;
  EXPECT_NE(problem().find("give a buffer with at least seqLen steps"),
            std::string::npos);
  args.intermediateSteps = 4;
  EXPECT_EQ(problem(), "");
  args.cuSeqlens = fake(0xB0000); // packed: a longer sequence's extra
  args.intermediateSteps = 3;     // tokens are not kept
  EXPECT_EQ(problem(), "");
  args.intermediateIndices = static_cast<const int32_t *>(fake(0xD0002));
  EXPECT_NE(problem().find("'intermediateIndices' is not aligned"),
            std::string::npos);
  args.intermediateIndices = nullptr;
  args.intermediateStates = static_cast<float *>(fake(0xC0008));
  EXPECT_NE(problem().find("'intermediateStates' is not aligned to 16"),
            std::string::npos);
  args.intermediateStates = nullptr;
  EXPECT_NE(problem().find("give the buffer too"), std::string::npos);
  args.numIntermediate = args.intermediateSteps = 0;

  args.disableStateUpdate = true;
  EXPECT_EQ(problem(), "");
  args.indicesPerToken = true;
  EXPECT_NE(problem().find("needs the state pool with a slot per sequence"),
            std::string::npos);
  args.indicesPerToken = false;
  args.state = nullptr;
  args.stateIndices = nullptr;
  args.numSlots = 0;
  EXPECT_NE(problem().find("with fla's form pass no finalState instead"),
            std::string::npos);
}

} // namespace
