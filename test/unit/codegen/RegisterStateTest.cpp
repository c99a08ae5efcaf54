//===- RegisterStateTest.cpp - The scan's state in registers ------------===//
//
// Part of lina. Which kernels keep the state in registers (StateRegisters.cuh)
// and which fall back to the shared-memory tile, and that every layout of it
// over the warps compiles. Whether the values are right is the GPU suite's
// job (its "+tv128w8", "+tv64w8", "+tv16w8" and "+shared" cases, and every
// default scan for the products' epilogues).
//
//===----------------------------------------------------------------------===//
#include "ExpectCubin.h"
#include "KernelText.h"
#include "lina/Codegen/KernelPlanner.h"
#include "lina/Runtime/Nvrtc.h"
#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

using namespace lina;
using test::count;
using test::plan;
using test::scanKernel;

namespace {

bool registerResident(const std::string &scan) {
  return scan.find("reg_state<") != std::string::npos;
}

class EveryPreset : public ::testing::TestWithParam<std::string> {};

// At the default schedule every preset's scan keeps the state in registers:
// no state tile is decayed, added to or read by a product in shared memory,
// and the K x V update is folded into the accumulators.
TEST_P(EveryPreset, DefaultScanKeepsTheStateInRegisters) {
  Spec spec = findPreset(GetParam())->spec;
  ScheduleOptions schedule = defaultSchedule(spec);
  std::string scan = scanKernel(plan(spec, schedule));
  EXPECT_TRUE(registerResident(scan)) << scan;
  EXPECT_EQ(scan.find("load_state<"), std::string::npos);
  EXPECT_EQ(scan.find("decay_state<"), std::string::npos);
  EXPECT_NE(scan.find("S.update<"), std::string::npos);
  // A product of the state: into a tile, or (its result only stored) into
  // the output.
  EXPECT_NE(scan.find("S.product"), std::string::npos);
  EXPECT_NE(scan.find("S.store("), std::string::npos);

  // shared_state restores the shared-memory tile, and it costs shared
  // memory: the state's K x tile-v floats come back.
  schedule.sharedState = true;
  KernelPlan shared = plan(spec, schedule);
  std::string sharedScan = scanKernel(shared);
  EXPECT_FALSE(registerResident(sharedScan));
  EXPECT_NE(sharedScan.find("load_state<"), std::string::npos);
  KernelPlan registers = plan(spec, defaultSchedule(spec));
  EXPECT_LT(registers.scanSharedBytes, shared.scanSharedBytes);
}

// The backward's two scans at their default layout hold their states in
// registers too: the states scan S, the reverse scan dL/dS, each stored
// from the accumulators before every chunk, with no state tile loaded,
// decayed or summed in shared memory.
TEST_P(EveryPreset, DefaultBackwardScansKeepTheirStatesInRegisters) {
  Spec spec = findPreset(GetParam())->spec;
  Expected<BackwardPlan> backward =
      planBackwardKernel(spec, defaultBackwardSchedule(spec));
  ASSERT_TRUE(backward.ok()) << backward.message();
  auto function = [&](const std::string &name) {
    size_t begin = backward->source.find("void " + name + "(");
    EXPECT_NE(begin, std::string::npos) << name;
    if (begin == std::string::npos)
      return std::string();
    return backward->source.substr(
        begin, backward->source.find("\n}\n", begin) - begin);
  };
  for (const std::string &name :
       {backward->statesKernel, backward->stateGradsKernel}) {
    std::string scan = function(name);
    EXPECT_TRUE(registerResident(scan)) << name << "\n" << scan;
    EXPECT_EQ(scan.find("load_state<"), std::string::npos) << name;
    EXPECT_EQ(scan.find("store_state<"), std::string::npos) << name;
    EXPECT_EQ(scan.find("decay_state<"), std::string::npos) << name;
    EXPECT_EQ(scan.find(" sum<"), std::string::npos) << name; // not cumsum
    EXPECT_NE(scan.find("S.update<"), std::string::npos) << name;
    EXPECT_EQ(count(scan, "S.store("), 2u) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(AllPresets, EveryPreset,
                         ::testing::ValuesIn(presetNames()));

// fp32 inputs use FMA products, which read the state from shared memory.
TEST(RegisterState, F32SpecsKeepTheSharedTile) {
  Spec spec = findPreset("gdn")->spec;
  spec.dtype = DType::F32;
  EXPECT_FALSE(registerResident(scanKernel(plan(spec, defaultSchedule(spec)))));
}

// A layout whose per-warp key columns are not whole 16-column mma steps
// falls back: K = 64 over eight warps on one 16-row value tile is 8 each.
TEST(RegisterState, LayoutsThatDoNotTileFallBack) {
  Spec spec = findPreset("gdn")->spec;
  spec.keyDim = spec.valueDim = 64;
  ScheduleOptions schedule = defaultSchedule(spec);
  schedule.tileV = 16;
  schedule.warps = 8;
  EXPECT_FALSE(registerResident(scanKernel(plan(spec, schedule))));
  schedule.warps = 4; // 16 key columns per warp
  EXPECT_TRUE(registerResident(scanKernel(plan(spec, schedule))));
}

// The materialize strategy writes every chunk's state to memory from its
// tile; it keeps the shared-memory state.
TEST(RegisterState, MaterializeKeepsTheSharedTile) {
  Spec spec = findPreset("gdn")->spec;
  ScheduleOptions schedule = defaultSchedule(spec);
  schedule.strategy = Strategy::Materialize;
  KernelPlan p = plan(spec, schedule);
  EXPECT_EQ(p.source.find("reg_state<"), std::string::npos);
}

// The delta rule's u - W S and q S + intra are done in the products'
// reduction passes where warps split the key columns (tv64 w8: two ways):
// no elementwise pass is left in the chunk. And q S, whose q is loaded
// before W S runs, is hoisted: its partial sums are made in W S's call,
// before W S's barrier, and intra's matmul adds them in its epilogue (one
// product call, one reduction pass and one barrier fewer), and writes the
// output from there. Three barriers a chunk besides the one product's own;
// eight before the epilogues.
/// The scan of `preset` at its default schedule on eight warps and value
/// tiles of `tileV` columns.
std::string scanOnEightWarps(const char *preset, int64_t tileV) {
  Spec spec = findPreset(preset)->spec;
  ScheduleOptions schedule = defaultSchedule(spec);
  schedule.tileV = tileV;
  schedule.warps = 8;
  return scanKernel(plan(spec, schedule));
}

TEST(RegisterState, DeltaRuleProductsTakeTheirEpilogues) {
  for (const char *preset : {"gdn", "kda", "deltanet"}) {
    SCOPED_TRACE(preset);
    std::string scan = scanOnEightWarps(preset, 64);
    EXPECT_EQ(count(scan, "S.product<16, -1>("), 1u) << scan;
    EXPECT_EQ(count(scan, "S.product<16, 1>("), 0u) << scan;
    EXPECT_EQ(count(scan, "S.partials<16>("), 1u) << scan;
    EXPECT_EQ(count(scan, "matmul_add_partials_into<"), 1u) << scan;
    EXPECT_EQ(count(scan, "S.reduce<"), 0u) << scan;
    EXPECT_LT(scan.find("S.partials<16>("), scan.find("S.product<16, -1>("))
        << scan;
    EXPECT_EQ(count(scan, "    sub<"), 0u) << scan;
    EXPECT_EQ(count(scan, "    add<"), 0u) << scan;
    size_t loop = scan.find("for (i64 t0");
    ASSERT_NE(loop, std::string::npos);
    EXPECT_LE(count(scan.substr(loop), "__syncthreads();"), 3u) << scan;
  }
  // Without a split (tv128 w8: a warp per 16 value rows, whole key rows)
  // each warp applies the epilogues to its own value columns as it writes
  // them: u - W S into u's tile, then P u + q S in registers straight to the
  // output. Only the warp's own lanes need ordering between the two
  // (__syncwarp); the landing of the fetched tiles is the chunk's one CTA
  // barrier.
  for (const char *preset : {"gdn", "kda", "deltanet"}) {
    SCOPED_TRACE(preset);
    std::string scan = scanOnEightWarps(preset, 128);
    EXPECT_TRUE(registerResident(scan));
    std::string loop = scan.substr(scan.find("for (i64 t0"));
    EXPECT_EQ(count(loop, "S.product<16, -1>("), 1u) << scan;
    EXPECT_EQ(count(loop, "S.product_add_mma_into<16, 16, false>("), 1u)
        << scan;
    EXPECT_EQ(count(loop, "    sub<"), 0u) << scan;
    EXPECT_EQ(count(loop, "    matmul<"), 0u) << scan;
    EXPECT_EQ(count(loop, "__syncthreads();"), 1u) << scan;
    EXPECT_EQ(count(loop, "__syncwarp();"), 1u) << scan;
    EXPECT_LT(loop.find("S.product<16, -1>("), loop.find("__syncwarp();"))
        << scan;
    EXPECT_LT(loop.find("__syncwarp();"), loop.find("S.product_add_mma_into<"))
        << scan;
  }
}

// A scan's output is written where the product that makes it sums its
// partials, into global memory (global_rows): no output tile, no barrier
// before a store pass, no store pass. Every preset's default scan does so
// but rwkv7's: the additive rules in the reduction of q S + intra, the
// delta rules in intra's matmul, which adds q S's partials. rwkv7's output
// adds a third term after that matmul (an add pass, then store_tile).
// Without a split of the keys (tv128 w8) each warp writes its own value
// columns of the output from its registers.
TEST_P(EveryPreset, DefaultScanWritesItsOutputFromAnEpilogue) {
  Spec spec = findPreset(GetParam())->spec;
  ScheduleOptions schedule = defaultSchedule(spec);
  std::string scan = scanKernel(plan(spec, schedule));
  size_t loop = scan.find("for (i64 t0");
  ASSERT_NE(loop, std::string::npos) << scan;
  std::string body = scan.substr(loop);
  if (GetParam() == "rwkv7") {
    EXPECT_EQ(count(body, "global_rows<"), 0u) << scan;
    EXPECT_EQ(count(body, "store_tile<"), 1u) << scan;
    return;
  }
  EXPECT_EQ(count(body, "store_tile<"), 0u) << scan;
  EXPECT_EQ(count(body, "global_rows<bf16>{(bf16 *)p.o"), 1u) << scan;
  bool additive = count(body, "S.product_into<") == 1;
  bool viaMatmul = count(body, "matmul_add_partials_into<") == 1;
  EXPECT_NE(additive, viaMatmul) << scan;

  schedule.tileV = 128;
  schedule.warps = 8;
  std::string unsplit = scanKernel(plan(spec, schedule));
  std::string unsplitBody = unsplit.substr(unsplit.find("for (i64 t0"));
  EXPECT_EQ(count(unsplitBody, "global_rows<bf16>{(bf16 *)p.o"), 1u)
      << unsplit;
  EXPECT_EQ(count(unsplitBody, "store_tile<"), 0u) << unsplit;
  // P V + q S (P U + q S) is one register product whose ops keep to their
  // warps' columns: the tiles' landing is the chunk's one CTA barrier.
  // Linear attention scales q in the scan (a CTA-wide pass) and keeps q S +
  // P V as an epilogue on the product.
  if (GetParam() == "linear_attn") {
    EXPECT_EQ(count(unsplitBody, "S.product_into<16, 1>("), 1u) << unsplit;
    return;
  }
  EXPECT_EQ(count(unsplitBody, "S.product_add_mma_into<"), 1u) << unsplit;
  EXPECT_EQ(count(unsplitBody, "__syncthreads();"), 1u) << unsplit;
}

// Each way of spreading the state over the warps compiles for sm_90: the
// key columns split 1, 2, 4 and 8 ways, at 16- and 32-token chunks, fused
// and split.
TEST(RegisterState, EveryWarpLayoutCompiles) {
  const cuda::Nvrtc &nvrtc = cuda::Nvrtc::get();
  if (!nvrtc.available())
    GTEST_SKIP() << nvrtc.status().message();
  struct Layout {
    int64_t tileV, warps, chunk;
    Strategy strategy;
  };
  const Layout layouts[] = {{128, 8, 16, Strategy::Split},
                            {64, 8, 16, Strategy::Split},
                            {32, 8, 32, Strategy::FusedScan},
                            {16, 8, 16, Strategy::Split}};
  for (const char *preset : {"kda", "rwkv7", "retnet"})
    for (const Layout &layout : layouts) {
      SCOPED_TRACE(std::string(preset) + " tv" + std::to_string(layout.tileV) +
                   " w" + std::to_string(layout.warps));
      Spec spec = findPreset(preset)->spec;
      spec.varlen = true;
      ScheduleOptions schedule = defaultSchedule(spec);
      schedule.tileV = layout.tileV;
      schedule.warps = layout.warps;
      schedule.chunkSize = layout.chunk;
      schedule.strategy = layout.strategy;
      KernelPlan p = plan(spec, schedule);
      ASSERT_TRUE(registerResident(scanKernel(p)));
      ASSERT_NO_FATAL_FAILURE(test::expectCubinForSm90(p.source));
    }
}

} // namespace
