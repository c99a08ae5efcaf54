//===- RowPassTest.cpp - Row-wise chains done in registers --------------===//
//
// Part of lina. Which of a prepare kernel's row-wise ops the emitter runs as
// row passes (RowPass.h, Prelude.cuh's "Row passes"), that the solves whose
// results only go to the workspace write them from registers, and that the
// kernels compile for every preset and dtype. Whether the values are right
// is the GPU suite's job: every split case runs a prepare kernel, and its
// "+misaligned" cases take the row fetches' element-by-element path.
//
//===----------------------------------------------------------------------===//
#include "ExpectCubin.h"
#include "lina/Codegen/KernelPlanner.h"
#include "lina/Runtime/Nvrtc.h"
#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

#include <regex>

using namespace lina;

namespace {

KernelPlan plan(const Spec &spec) {
  Expected<KernelPlan> p = planChunkKernel(spec, defaultSchedule(spec));
  EXPECT_TRUE(p.ok()) << p.message();
  return p.ok() ? std::move(p).value() : KernelPlan();
}

/// The prepare kernel's text, without the prelude and the scan.
std::string prepareKernel(const KernelPlan &plan) {
  size_t begin = plan.source.find("lina_chunk_prepare(");
  if (begin == std::string::npos)
    return "";
  return plan.source.substr(begin, plan.source.find("\n}\n", begin) - begin);
}

int count(const std::string &text, const std::string &what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + what.size()))
    ++n;
  return n;
}

// Gated DeltaNet's prepare kernel: q, k and v wait in registers, every
// norm, scale and decay of rows is a line of a pass (no call of its own),
// the decayed q and k (which only the scan reads) go from registers to the
// workspace, and so do the solves for W and U.
TEST(RowPasses, GatedDeltaNetPrepareRunsItsRowOpsInRegisters) {
  Spec spec = findPreset("gdn")->spec;
  std::string prepare = prepareKernel(plan(spec));
  ASSERT_FALSE(prepare.empty());
  EXPECT_EQ(count(prepare, "row_fetch<"), 3) << prepare;
  for (const char *call : {"l2norm<", "decay_rows<", "scale<", "load_tile<16, 128"})
    EXPECT_EQ(count(prepare, call), 0) << call << " in\n" << prepare;
  EXPECT_EQ(count(prepare, "// A row pass"), 3) << prepare;
  EXPECT_EQ(count(prepare, "normalized("), 2) << prepare;
  EXPECT_EQ(count(prepare, ".to_global("), 2) << prepare;
  EXPECT_EQ(count(prepare, "tri_solve_to_global<"), 2) << prepare;
  EXPECT_EQ(count(prepare, "tri_solve<"), 0) << prepare;
}

// A lane of a pass takes 1, 2, 4 or 8 columns: at key and value dims of 96
// (three a lane) the prepare kernel keeps the tile calls, and compiles.
// (A three-column row once moved only its first column.)
// mamba2's k is read by the decay product (from its tile) and by the decay
// of rows whose result only the scan reads: the pass holding k's rows
// writes k's tile itself and sends the decayed rows to the workspace, so
// neither a copy of k nor a decay_rows call nor a store of its tile is
// left (H200: mamba2 1x8192x96x128 0.760 -> 0.710 ms).
TEST(RowPasses, AFetchedTileIsWrittenByThePassWhoseRowsLeaveFromRegisters) {
  Spec spec = findPreset("mamba2")->spec;
  spec.keyDim = spec.valueDim = 128;
  std::string prepare = prepareKernel(plan(spec));
  ASSERT_FALSE(prepare.empty());
  EXPECT_EQ(count(prepare, "row_fetch<"), 2) << prepare;
  EXPECT_TRUE(std::regex_search(prepare, std::regex(R"(rows1\.fetch\(\(const bf16 \*\)p\.k)")))
      << prepare;
  for (const char *call : {"load_tile<16, 128", "decay_rows<", "store_tile<16, 128"})
    EXPECT_EQ(count(prepare, call), 0) << call << " in\n" << prepare;
  // Both passes write a tile the decay product reads: q scaled, and k.
  EXPECT_EQ(count(prepare, ".to_tile("), 2) << prepare;
  EXPECT_EQ(count(prepare, "x0 = rows1.at(i);\n      x0.to_tile("), 1)
      << prepare;
  EXPECT_EQ(count(prepare, ".to_global("), 2) << prepare;
}

// A decay of rows whose result stays in the kernel (rwkv7's decayed a,
// read by its decay products) leaves a as a tile copied at the top: its
// rows would only wait in registers.
TEST(RowPasses, AFetchedTileStaysACopyWhenNoRowsLeaveFromRegisters) {
  Spec spec = findPreset("rwkv7")->spec;
  std::string prepare = prepareKernel(plan(spec));
  ASSERT_FALSE(prepare.empty());
  EXPECT_TRUE(std::regex_search(
      prepare, std::regex(R"(load_tile<[^>]*>\([^;]*p\.a \+)")))
      << prepare;
  EXPECT_EQ(count(prepare, "decay_rows<"), 1) << prepare;
}

TEST(RowPasses, OnlyPowerOfTwoRowsOf32To256Columns) {
  for (int64_t dim : {32, 64, 96, 128, 256}) {
    SCOPED_TRACE(dim);
    Spec spec = findPreset("gdn")->spec;
    spec.keyDim = spec.valueDim = dim;
    std::string prepare = prepareKernel(plan(spec));
    bool fused = dim != 96;
    EXPECT_EQ(count(prepare, "// A row pass") > 0, fused) << prepare;
    EXPECT_EQ(count(prepare, "l2norm<") == 0, fused) << prepare;
  }
  if (!cuda::Nvrtc::get().available())
    GTEST_SKIP() << "NVRTC is not available";
  Spec spec = findPreset("kda")->spec;
  spec.keyDim = spec.valueDim = 96;
  ASSERT_NO_FATAL_FAILURE(test::expectCubinForSm90(plan(spec).source));
}

// The state in shared memory or not, only the prepare kernel has passes:
// the scan's row ops (none at the default schedule) stay calls.
TEST(RowPasses, OnlyThePrepareKernelHasThem) {
  for (const Preset &preset : presets()) {
    KernelPlan p = plan(preset.spec);
    std::string prepare = prepareKernel(p);
    EXPECT_EQ(count(p.source, "// A row pass"), count(prepare, "// A row pass"))
        << preset.name;
  }
}

using Param = std::tuple<std::string, DType>;
class EveryPrepare : public ::testing::TestWithParam<Param> {};

// Every row fetch is read by exactly one pass, and every value a pass
// writes to a tile is read after the pass by some call: a pass never keeps
// what nobody reads nor drops what someone does (the planner's toShared).
TEST_P(EveryPrepare, FetchesAreReadAndTilesWrittenAreRead) {
  auto [name, dtype] = GetParam();
  Spec spec = findPreset(name)->spec;
  spec.dtype = dtype;
  std::string prepare = prepareKernel(plan(spec));
  std::regex fetch(R"(row_fetch<[^>]*> (rows[0-9]+);)");
  for (std::sregex_iterator it(prepare.begin(), prepare.end(), fetch), end;
       it != end; ++it)
    EXPECT_EQ(count(prepare, (*it)[1].str() + ".at(i)"), 1)
        << (*it)[1] << " in\n" << prepare;
  std::regex written(R"(\.to_tile\((\(smem \+ [0-9]+\)), r\))");
  for (std::sregex_iterator it(prepare.begin(), prepare.end(), written), end;
       it != end; ++it) {
    std::string tile = (*it)[1].str();
    size_t after = prepare.find("\n    }\n", it->position());
    EXPECT_NE(prepare.find(tile, after), std::string::npos)
        << tile << " is written but never read in\n" << prepare;
  }
}

TEST_P(EveryPrepare, Compiles) {
  if (!cuda::Nvrtc::get().available())
    GTEST_SKIP() << "NVRTC is not available";
  auto [name, dtype] = GetParam();
  Spec spec = findPreset(name)->spec;
  spec.dtype = dtype;
  ASSERT_NO_FATAL_FAILURE(test::expectCubinForSm90(plan(spec).source));
}

std::vector<Param> everyPresetAndDtype() {
  std::vector<Param> params;
  for (const Preset &preset : presets())
    for (DType dtype : {DType::BF16, DType::F16, DType::F32})
      params.emplace_back(preset.name, dtype);
  return params;
}

INSTANTIATE_TEST_SUITE_P(
    AllPresets, EveryPrepare, ::testing::ValuesIn(everyPresetAndDtype()),
    [](const ::testing::TestParamInfo<Param> &info) {
      return std::get<0>(info.param) + "_" +
             toString(std::get<1>(info.param));
    });

} // namespace
