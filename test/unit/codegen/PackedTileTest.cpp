//===- PackedTileTest.cpp - bf16 tiles that only tensor cores read ------===//
//
// Part of lina. Which tiles the emitter keeps packed (bf16 in shared memory,
// read by ldmatrix: Prelude.cuh's "Packed tiles"), that only tensor-core
// products ever read them, and that every such kernel compiles. Whether the
// values are right is the GPU suite's job: every bf16 case runs them.
//
//===----------------------------------------------------------------------===//
#include "ExpectCubin.h"
#include "lina/Codegen/KernelPlanner.h"
#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

#include <regex>
#include <tuple>

using namespace lina;

namespace {

KernelPlan plan(const Spec &spec, Strategy strategy, bool prefetch) {
  ScheduleOptions schedule = defaultSchedule(spec);
  schedule.strategy = strategy;
  schedule.prefetch = prefetch;
  Expected<KernelPlan> p = planChunkKernel(spec, schedule);
  EXPECT_TRUE(p.ok()) << p.message();
  return p.ok() ? std::move(p).value() : KernelPlan();
}

/// The generated kernels, without the prelude.
std::string kernels(const KernelPlan &plan) {
  size_t begin = plan.source.find("extern \"C\" __global__");
  return begin == std::string::npos ? "" : plan.source.substr(begin);
}

/// Each line of `text` that passes a packed tile, as "callee: line".
std::vector<std::string> packedTileUses(const std::string &text) {
  std::vector<std::string> uses;
  std::regex call(R"(^\s*([A-Za-z_][\w.]*)(<[^(]*>)?\()");
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos)
      end = text.size();
    std::string line = text.substr(start, end - start);
    std::smatch m;
    if (line.find("(bf16 *)(smem") != std::string::npos &&
        std::regex_search(line, m, call))
      uses.push_back(m[1].str() + ": " + line);
    start = end + 1;
  }
  return uses;
}

using Param = std::tuple<std::string, Strategy, bool>;
class EveryKernel : public ::testing::TestWithParam<Param> {};

// A packed tile is written only by the copy that loads it and read only by
// the calls that take their operands as fragments: a product on the
// register state, its folded update, a matmul. Any other op would read its
// bf16 bits as floats.
TEST_P(EveryKernel, PackedTilesMeetOnlyCopiesAndTensorCores) {
  auto [name, strategy, prefetch] = GetParam();
  Spec spec = findPreset(name)->spec;
  KernelPlan p = plan(spec, strategy, prefetch);
  for (const std::string &use : packedTileUses(kernels(p))) {
    std::string callee = use.substr(0, use.find(':'));
    bool copy = callee == "load_tile" || callee == "tile_copy" ||
                (callee.rfind("fetched", 0) == 0 &&
                 callee.size() > 7 && callee.find(".commit") != std::string::npos);
    bool tensorCores = callee == "S.product" || callee == "S.product_into" ||
                       callee == "S.partials" || callee == "S.update" ||
                       callee == "matmul" || callee == "matmul_add_partials" ||
                       callee == "matmul_add_partials_into";
    EXPECT_TRUE(copy || tensorCores) << use;
  }
}

// And the kernels compile with them (CudaCompileTest compiles the default
// split scan with prefetch; this covers every strategy without it too).
TEST_P(EveryKernel, Compiles) {
  if (!cuda::Nvrtc::get().available())
    GTEST_SKIP() << cuda::Nvrtc::get().status().message();
  auto [name, strategy, prefetch] = GetParam();
  Spec spec = findPreset(name)->spec;
  spec.varlen = true;
  KernelPlan p = plan(spec, strategy, prefetch);
  ASSERT_NO_FATAL_FAILURE(test::expectCubinForSm90(p.source));
}

INSTANTIATE_TEST_SUITE_P(
    AllPresets, EveryKernel,
    ::testing::Combine(::testing::ValuesIn(presetNames()),
                       ::testing::Values(Strategy::FusedScan,
                                         Strategy::Materialize,
                                         Strategy::Split),
                       ::testing::Bool()),
    [](const ::testing::TestParamInfo<Param> &info) {
      return std::get<0>(info.param) + "_" + toString(std::get<1>(info.param)) +
             (std::get<2>(info.param) ? "_prefetch" : "");
    });

// The delta rule's split scan reads four bf16 workspace tiles, each only
// by the tensor cores: W and q~ (products with the state), A (the intra-
// chunk matmul), k~ (the state update). U stays fp32: it is the base of
// U - W S. Packed, they take half the shared memory.
// Without decay (DeltaNet) q~ and k~ are the normalized q and k, which the
// prepare kernel's P_qk also reads: a value the scan loads reads nothing
// there, so they are packed all the same.
TEST(PackedTiles, DeltaRuleScanPacksItsFour16BitWorkspaceTiles) {
  // Packed tiles keep the workspace's element type, so cp.async copies them.
  std::regex packedCommit(R"(tile_copy<\d+, \d+, bf16>::fetch<true>\(\(bf16 \*\)\(smem)");
  for (const char *name : {"deltanet", "gdn"}) {
    SCOPED_TRACE(name);
    std::string text =
        kernels(plan(findPreset(name)->spec, Strategy::Split, true));
    auto begin = std::sregex_iterator(text.begin(), text.end(), packedCommit);
    EXPECT_EQ(std::distance(begin, std::sregex_iterator()), 4) << text;
  }
  Spec spec = findPreset("gdn")->spec;
  KernelPlan p = plan(spec, Strategy::Split, true);
  std::string text = kernels(p);
  EXPECT_NE(text.find("S.product<16, -1>((smem"), std::string::npos) << text;

  // An f16 spec packs its f16 tiles alike (the mma's operand type there),
  // in as much shared memory as bf16's.
  Spec f16 = spec;
  f16.dtype = DType::F16;
  KernelPlan packedF16 = plan(f16, Strategy::Split, true);
  std::string f16Text = kernels(packedF16);
  std::regex f16Commit(
      R"(tile_copy<\d+, \d+, f16>::fetch<true>\(\(f16 \*\)\(smem)");
  auto f16Begin =
      std::sregex_iterator(f16Text.begin(), f16Text.end(), f16Commit);
  EXPECT_EQ(std::distance(f16Begin, std::sregex_iterator()), 4) << f16Text;
  EXPECT_EQ(packedF16.scanSharedBytes, p.scanSharedBytes);
  // f32 specs multiply on the fp32 units: nothing is packed.
  Spec f32 = spec;
  f32.dtype = DType::F32;
  KernelPlan unpacked = plan(f32, Strategy::Split, true);
  EXPECT_EQ(kernels(unpacked).find(" *)(smem"), std::string::npos);
  EXPECT_LT(p.scanSharedBytes, unpacked.scanSharedBytes);
}

// Tiles from lina's own workspace are 16-byte words by construction, so
// their fetches skip the unaligned path; user tensors (the fused scan's
// inputs) keep the check.
TEST(PackedTiles, OnlyWorkspaceFetchesAreKnownAligned) {
  Spec spec = findPreset("gdn")->spec;
  // The scan's fetches walk with cursors: `record` over the workspace's
  // records, an element offset per input row layout.
  std::string split = kernels(plan(spec, Strategy::Split, true));
  EXPECT_NE(split.find(">::fetch<true>((bf16 *)(smem + "), std::string::npos)
      << split;
  EXPECT_NE(split.find(" + into), (bf16 *)(record + "), std::string::npos)
      << split;
  EXPECT_NE(split.find("record = p.chunk_data + "), std::string::npos)
      << split;
  EXPECT_EQ(split.find(".fetch<true>((const "), std::string::npos) << split;
  EXPECT_EQ(split.find(".fetch<true>(p."), std::string::npos) << split;
  std::string fused = kernels(plan(spec, Strategy::FusedScan, true));
  EXPECT_NE(fused.find(".fetch((const bf16 *)p.q + cursor"), std::string::npos)
      << fused;
  EXPECT_NE(fused.find("cursor0 = (t0 * "), std::string::npos) << fused;
  EXPECT_EQ(fused.find(".fetch<true>"), std::string::npos) << fused;
}

// The split scan decays the state by the chunk's gate sums' last row only:
// the prepare kernel stores that row's exponentials (the decay factors), so
// the scan neither loads the gates nor sums them (one barrier fewer on its
// serial path) nor takes an exponential, for scalar and per-channel gates
// alike.
TEST(LastGateRow, SplitScanLoadsOneRowOfGateSums) {
  for (const char *name : {"gdn", "kda"}) {
    SCOPED_TRACE(name);
    Spec spec = findPreset(name)->spec;
    KernelPlan p = plan(spec, Strategy::Split, true);
    std::string text = kernels(p);
    size_t scan = text.find(p.scanKernel + "(");
    ASSERT_NE(scan, std::string::npos);
    std::string prepare = text.substr(0, scan), scanText = text.substr(scan);
    int64_t gateCols = spec.decay == DecayKind::Scalar ? 1 : spec.keyDim;
    std::string row = "tile_copy<1, " + std::to_string(gateCols) + ", float>";
    EXPECT_NE(scanText.find(row), std::string::npos) << scanText;
    EXPECT_EQ(scanText.find("cumsum<"), std::string::npos) << scanText;
    EXPECT_EQ(scanText.find("p.g"), std::string::npos) << scanText;
    EXPECT_NE(prepare.find("store_decay_factors<" + std::to_string(gateCols) +
                           ">("),
              std::string::npos)
        << prepare;
    EXPECT_NE(scanText.find("S.decay<" + std::to_string(gateCols) + ", true>("),
              std::string::npos)
        << scanText;
  }
}

// The additive rules' intra-chunk output P v crosses the cut as P (C x C,
// bf16) and the scan redoes P v with the v it loads: the record holds no
// C x V fp32 tile, and the scan has the matmul. Before, mamba2's
// record was 16 x 128 fp32 (intra) + two 16 x 128 bf16 (q~, k~) + the gate
// row: 4100 floats; now 16 x 16 bf16 takes intra's place. rwkv7's P v
// feeds another add, not q S's, and stays stored.
TEST(SplitRecord, IntraOutputIsRedoneFromPInTheScan) {
  for (const char *name : {"mamba2", "gla", "retnet", "linear_attn"}) {
    SCOPED_TRACE(name);
    Spec spec = findPreset(name)->spec;
    spec.keyDim = spec.valueDim = 128;
    KernelPlan p = plan(spec, Strategy::Split, true);
    int64_t gateRow = spec.decay == DecayKind::PerChannel ? 128 : 4;
    // q~ and k~ (bf16, 16 x 128 each), P (bf16 16 x 16), the gate row if any.
    EXPECT_LE(p.chunkDataFloats, 2 * 1024 + 128 + gateRow);
    std::string text = kernels(p);
    std::string scan = text.substr(text.find(p.scanKernel + "("));
    std::string tileV = std::to_string(defaultSchedule(spec).tileV);
    EXPECT_NE(scan.find("matmul<16, " + tileV + ", 16, false, true>("),
              std::string::npos)
        << scan;
    EXPECT_EQ(scan.find("tile_fetch<16, " + tileV + ", float>"),
              std::string::npos)
        << scan;
  }
  Spec rwkv7 = findPreset("rwkv7")->spec;
  std::string scan = kernels(plan(rwkv7, Strategy::Split, true));
  scan = scan.substr(scan.find("lina_chunk_split_scan("));
  EXPECT_EQ(scan.find("    matmul<"), std::string::npos) << scan;
}

} // namespace
