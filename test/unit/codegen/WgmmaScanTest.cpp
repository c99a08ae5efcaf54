//===- WgmmaScanTest.cpp - The fused scan as warpgroup products ----------===//
//
// Part of lina. The schedule's warpgroup products (the kernels printed from the
// chunk's ops, WarpgroupScan.h, from the pieces of WgmmaScan.cuh,
// WarpgroupScan.cuh and WarpgroupChannels.cuh): which specs and layouts the
// planner takes and which it refuses (naming the field), the kernels' NVRTC
// compile for sm_90a (no spills, the CTAs an SM they are planned for), and
// where the default schedule picks them. The GPU suite checks their results
// (test/gpu, the "wgmma" layout).
//
//===----------------------------------------------------------------------===//
#include "CompileReport.h"

#include "lina/Codegen/KernelPlanner.h"
#include "lina/Runtime/KernelForms.h"
#include "lina/Runtime/Nvrtc.h"
#include "lina/Runtime/PtxasReport.h"
#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <sstream>

#include <tuple>

using namespace lina;
using lina::test::compileWithReport;
using lina::test::Report;

namespace {

Spec preset(const char *name, int64_t heads = 16, int64_t dim = 128) {
  Spec spec = findPreset(name)->spec;
  spec.keyDim = spec.valueDim = dim;
  spec.heads = spec.valueHeads = heads;
  return spec;
}

ScheduleOptions wgmmaSchedule() { return withWarpgroup(ScheduleOptions()); }

constexpr const char *kEligible[] = {"mamba2", "retnet", "linear_attn"};
constexpr const char *kEligibleDelta[] = {"gdn", "deltanet", "kda"};
/// The presets with a per-channel decay and no low-rank terms (KDA; GLA,
/// the additive rule): a prepare kernel that stores each chunk's operands
/// scaled by the decays, and the scan.
constexpr const char *kTwoKernels[] = {"kda", "gla"};

TEST(WgmmaScan, PlansTheAdditiveRulesWithAScalarOrNoDecay) {
  // Every spelling gets the scan printed from the ops: each gate as its
  // column, a token's copied with the chunk, a head's filled, none zero;
  // the presets' bf16 and the same rules in f16 alike.
  const char *gateColumns[] = {
      "const wg_column c0 = wg_column_of(raw + (stage * 1 + 0) * 64);",
      "const wg_column c0 = wg_column_fill(p.g[hv], n);",
      "const wg_column c0 = wg_column{0.0f, 0.0f};"};
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(kEligible[i]);
    Spec spec = preset(kEligible[i], 4);
    spec.valueHeads = 8; // GQA: two value heads a key head
    for (DType dtype : {DType::BF16, DType::F16}) {
      spec.dtype = dtype;
      ASSERT_TRUE(canRunWgmmaScan(spec));
      Expected<KernelPlan> plan = planChunkKernel(spec, wgmmaSchedule());
      ASSERT_TRUE(plan.ok()) << plan.message();
      EXPECT_TRUE(plan->needsSm90a);
      EXPECT_EQ(plan->scanKernel, "lina_chunk_fused");
      EXPECT_TRUE(plan->prepareKernel.empty());
      EXPECT_EQ(plan->threads, 256);
      EXPECT_EQ(plan->workspaceRecordFloats(), 0);
      EXPECT_EQ(plan->source.find("wgmma_additive_scan"), std::string::npos);
      EXPECT_NE(plan->source.find("const int hv = blockIdx.x / (V / VT) % 8;"),
                std::string::npos);
      EXPECT_NE(plan->source.find("const int kh = hv / (8 / 4);"),
                std::string::npos);
      EXPECT_NE(plan->source.find(gateColumns[i]), std::string::npos);
      // Two stages of q, k, v (96 KB) and the rest, within a CTA's limit.
      EXPECT_GT(plan->scanSharedBytes, 96u * 1024);
      EXPECT_LE(plan->scanSharedBytes, 227u * 1024);
    }
  }
  // Without the flag the same schedule is the mma.sync fused scan.
  ScheduleOptions plain = wgmmaSchedule();
  plain.warpgroup = false;
  Expected<KernelPlan> mma = planChunkKernel(preset("mamba2"), plain);
  ASSERT_TRUE(mma.ok()) << mma.message();
  EXPECT_FALSE(mma->needsSm90a);
  EXPECT_EQ(mma->source.find("wg_issue_scores(pacc"), std::string::npos);
}

/// The additive specs no hand-written kernel covered: a write weight from
/// beta's sigmoid, Mamba-2's gate computed in the kernel from dt, and q and
/// k normalised in the kernel.
static std::vector<std::pair<const char *, Spec>> weightedAndComputed() {
  Spec weighted = preset("retnet");
  weighted.beta = BetaSource::Sigmoid;
  weighted.write = WriteWeight::Beta;
  Spec computed = preset("mamba2");
  computed.gate = GateSource::Softplus;
  Spec normed = preset("mamba2");
  normed.qkL2Norm = true;
  return {{"retnet, a sigmoid write weight", weighted},
          {"mamba2, a softplus gate", computed},
          {"mamba2, q and k normalised", normed}};
}

// Their factors come from their ops: the write weight's column on P's key
// tokens and on K~'s rows; the computed gate's column under the running sum
// that every decay reads.
TEST(WgmmaScan, PrintsWriteWeightsAndComputedGatesFromTheOps) {
  for (auto [name, spec] : weightedAndComputed()) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(canRunWgmmaScan(spec));
    ASSERT_TRUE(canRunWgmmaSegments(spec));
    ScheduleOptions pieces = wgmmaSchedule();
    pieces.segments = 4;
    Expected<KernelPlan> segmented = planChunkKernel(spec, pieces);
    ASSERT_TRUE(segmented.ok()) << segmented.message();
    EXPECT_NE(segmented->source.find("wg_store_rows<K>(rec, qt, n,"),
              std::string::npos);
    Expected<KernelPlan> plan = planChunkKernel(spec, wgmmaSchedule());
    ASSERT_TRUE(plan.ok()) << plan.message();
    EXPECT_EQ(plan->scanKernel, "lina_chunk_fused");
    const std::string &source = plan->source;
    if (spec.write == WriteWeight::Beta) {
      EXPECT_NE(source.find("return 1.000000000e+00f * sigmoid(x); });"),
                std::string::npos);
      // c3, the weight, tabulated: K~'s rows and P's key tokens u. K~'s
      // row factor (a decay times the weight) is evaluated once a row into
      // a table of its own, which the per-piece loop reads; the output's
      // (a decay times the scale) likewise.
      EXPECT_NE(source.find("wg_column_rows(n, [&](int r) { return "
                            "__expf(last1 - tab1[r]) * tab3[r]; })"
                            ".store(mine + 192);"),
                std::string::npos);
      EXPECT_NE(source.find("wg_scale_rows<K>(ktilde, kt, n, [&](int r) { "
                            "return ftab1[r]; });"),
                std::string::npos);
      EXPECT_NE(source.find("wg_scale_columns(oacc, [&](int t) { return "
                            "ftab0[t]; });"),
                std::string::npos);
      // P's mask selects, with the factor evaluated either way.
      EXPECT_NE(source.find("return wg_kept(u <= t, "), std::string::npos);
      EXPECT_NE(source.find("* tab3[u] *"), std::string::npos);
    } else if (spec.gate == GateSource::Softplus) {
      EXPECT_NE(source.find("-gate_a * softplus(x + gate_bias)"),
                std::string::npos);
      EXPECT_NE(source.find("const wg_column c2 = c1.cumsum(n, false);"),
                std::string::npos);
    } else {
      // Each tile's rows' norms, a table each, before the columns' barrier;
      // q's norm on P's query rows, k's on its key tokens.
      EXPECT_NE(source.find("wg_row_norms<K>(norms + 0 * 64, qt);"),
                std::string::npos);
      EXPECT_NE(source.find("wg_row_norms<K>(norms + 1 * 64, kt);"),
                std::string::npos);
      EXPECT_NE(source.find("norms[0 * 64 + t]"), std::string::npos);
      EXPECT_NE(source.find("norms[1 * 64 + u]"), std::string::npos);
    }
  }
}

/// A plan of two kernels printed from the ops: the prepare kernel and the
/// split scan, whose CTAs hold whole heads or value tiles.
static void expectPrintedPair(const KernelPlan &plan) {
  EXPECT_EQ(plan.strategy, Strategy::Split);
  EXPECT_EQ(plan.prepareKernel, "lina_chunk_prepare");
  EXPECT_EQ(plan.scanKernel, "lina_chunk_split_scan");
  EXPECT_NE(plan.source.find(" lina_chunk_prepare(lina::Params p)"),
            std::string::npos);
  EXPECT_NE(plan.source.find(" lina_chunk_split_scan(lina::Params p, const "
                             "__grid_constant__ lina::wg_maps maps)"),
            std::string::npos);
}

// KDA's and GLA's presets plan two kernels printed from their ops: the
// chunks' operands with their per-channel decays applied (and KDA's
// solves) stored, a record a chunk slot and value head, and the scan that
// reads them; the split strategy's shape.
TEST(WgmmaScan, PlansThePerChannelPresetsAsPreparedChunksThenTheScan) {
  for (const char *name : kTwoKernels) {
    SCOPED_TRACE(name);
    Spec spec = preset(name, 4);
    spec.valueHeads = 8;
    ASSERT_TRUE(canRunWgmmaScan(spec));
    const ScheduleOptions schedule = withWarpgroup(ScheduleOptions(), spec);
    EXPECT_EQ(schedule.tileV, 128);
    EXPECT_EQ(schedule.warps, 8);
    Expected<KernelPlan> plan = planChunkKernel(spec, schedule);
    ASSERT_TRUE(plan.ok()) << plan.message();
    EXPECT_TRUE(plan->needsSm90a);
    expectPrintedPair(*plan);
    EXPECT_EQ(plan->chunkSize, 64);
    EXPECT_EQ(plan->threads, 256);
    const bool delta = std::string(name) == "kda";
    // The record brings X and K~ (64 x 128 bf16 each), P (64 x 64 bf16)
    // and the decay (K floats, padded to 1 KB); KDA's also Y, T (64 x 64
    // bf16) and v's factor in the residual (padded to 1 KB).
    EXPECT_EQ(plan->workspaceRecordFloats(),
              ((delta ? 3 : 2) * 64 * 128 * 2 + (delta ? 2 : 1) * 64 * 64 * 2 +
               (delta ? 2 : 1) * 1024) /
                  4);
    const std::string prepare =
        plan->source.substr(0, plan->source.find("lina_chunk_split_scan("));
    const std::string scan =
        plan->source.substr(plan->source.find("lina_chunk_split_scan("));
    // Grouped value heads: value head hv reads key head hv / 2.
    EXPECT_NE(prepare.find("const int kh = hv / (8 / 4);"), std::string::npos);
    // The gates' running sums and the scores as bf16 block products (bf16
    // inputs), P against k's rows first; KDA's A beside it, in q's tile's
    // halves, which the solve reads.
    EXPECT_NE(prepare.find("wg_channel_gates<K, true>(sm, n, false,"),
              std::string::npos);
    EXPECT_NE(prepare.find("wg_channel_scores<K, true>(sm, sm.tiles[1], "
                           "n,\n      wg_box(sm.tiles[0], false,"),
              std::string::npos);
    EXPECT_EQ(prepare.find("wg_box(sm.tiles[1], true,") != std::string::npos,
              delta);
    EXPECT_EQ(prepare.find("wg_unit_lower_inverse<kWgHalvesLd>(a, sm.right,") !=
                  std::string::npos,
              delta);
    // KDA's q and k are normalised in the prepare kernel, GLA's not.
    EXPECT_EQ(prepare.find("wg_row_norms<K>(norms + 1 * 64, sm.tiles[1]);") !=
                  std::string::npos,
              delta);
    // The scan applies nothing but the state's decay.
    EXPECT_NE(scan.find("wg_decay_key_columns<K>(s,"), std::string::npos);
    EXPECT_EQ(scan.find("wg_issue_scores"), std::string::npos);
    EXPECT_EQ(scan.find("wg_fetch_qkv"), std::string::npos);
    EXPECT_EQ(scan.find("wg_issue_solve(") != std::string::npos, delta);
    // The prepare kernel's shared memory leaves two CTAs an SM; the scan's
    // stages hold v's tile and the record.
    EXPECT_GT(plan->prepareSharedBytes, 100u * 1024);
    EXPECT_LE(plan->prepareSharedBytes, 113u * 1024);
    EXPECT_GT(plan->scanSharedBytes, 2u * (16 + (delta ? 66 : 41)) * 1024);
    EXPECT_LE(plan->scanSharedBytes, 227u * 1024);
  }
  // q and k given normalised: KDA's prepare kernel forms no norms.
  Spec raw = preset("kda");
  raw.qkL2Norm = false;
  Expected<KernelPlan> plan =
      planChunkKernel(raw, withWarpgroup(ScheduleOptions(), raw));
  ASSERT_TRUE(plan.ok()) << plan.message();
  expectPrintedPair(*plan);
  EXPECT_EQ(plan->source.find("wg_row_norms<K>("), std::string::npos);
}

/// Delta rules as no preset spells them: a fixed decay, a sigmoid beta, a
/// softplus gate, f16, d64.
static std::vector<std::pair<const char *, Spec>> printedDeltaRules() {
  Spec fixed = preset("gdn"), sigmoidBeta = preset("gdn"),
       softplus = preset("gdn"), half = preset("gdn"),
       d64 = preset("gdn", 16, 64);
  fixed.decay = DecayKind::FixedPerHead;
  sigmoidBeta.beta = BetaSource::Sigmoid;
  softplus.gate = GateSource::Softplus;
  half.dtype = DType::F16;
  return {{"fixed decay", fixed},
          {"sigmoid beta", sigmoidBeta},
          {"softplus gate", softplus},
          {"f16", half},
          {"d64", d64}};
}

// Their wgmma kernels are printed from the ops: a prepare kernel that
// stores T = (I + A)^-1 a chunk, and a scan that forms the residual, solves
// it with T and feeds the values to the output and the update from
// registers.
TEST(WgmmaScan, PrintsTheDeltaRulesFromTheirOps) {
  for (auto [name, spec] : printedDeltaRules()) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(canRunWgmmaScan(spec));
    Expected<KernelPlan> plan =
        planChunkKernel(spec, withWarpgroup(ScheduleOptions(), spec));
    ASSERT_TRUE(plan.ok()) << plan.message();
    expectPrintedPair(*plan);
    // T, then a slot each for the values the scan reads from the record:
    // k's norms, the gates' running sum, beta, and the products of Y's and
    // K~'s row factors (lina-warpgroup-record).
    EXPECT_EQ(plan->workspaceRecordFloats(), 64 * 64 / 2 + 5 * 64);
    EXPECT_NE(
        plan->source.find("wg_unit_lower_inverse(a, t, (float *)kt, [] {});"),
        std::string::npos);
    // The scan neither sums gates nor normalises k's rows: it normalises
    // only q's.
    const std::string scan =
        plan->source.substr(plan->source.find("lina_chunk_split_scan("));
    EXPECT_EQ(scan.find(".cumsum("), std::string::npos);
    const size_t norms = scan.find("wg_row_norms<K>(");
    ASSERT_NE(norms, std::string::npos);
    const std::string qNorms = "wg_row_norms<K>(norms + 0 * 64, qt);";
    EXPECT_EQ(scan.compare(norms, qNorms.size(), qNorms), 0);
    EXPECT_EQ(scan.find("wg_row_norms<K>(", norms + 1), std::string::npos);
    EXPECT_NE(plan->source.find("wg_residual(racc, yacc, vt, wg, n,"),
              std::string::npos);
    EXPECT_NE(plan->source.find("wg_issue_values_update<K>(s, ukf, kt);"),
              std::string::npos);
    // The default on sm_90, here (16 heads) a CTA a 64-column value tile:
    // half a head at d128, a whole one at d64.
    ScheduleOptions chosen = defaultSchedule(spec, 1, 132, 8192, "sm_90");
    EXPECT_TRUE(chosen.warpgroup);
    EXPECT_EQ(chosen.tileV, 64);
  }
  // DeltaNet and Gated DeltaNet as the presets spell them too: the
  // residual solved with the chunk's T, the values into the update.
  for (const char *name : {"gdn", "deltanet"}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(canRunWgmmaScan(preset(name)));
    Expected<KernelPlan> plan = planChunkKernel(preset(name), wgmmaSchedule());
    ASSERT_TRUE(plan.ok()) << plan.message();
    expectPrintedPair(*plan);
    EXPECT_NE(plan->source.find("wg_residual(racc, yacc, vt, wg, n,"),
              std::string::npos);
    EXPECT_NE(plan->source.find("wg_issue_values_update<K>(s, ukf, kt);"),
              std::string::npos);
  }
}

/// GLA's additive rule and KDA's delta rule with a per-channel decay as no
/// preset spells them.
static std::vector<std::pair<const char *, Spec>> printedChannelRules() {
  Spec writeGate = preset("gla"), softplus = preset("gla"),
       normed = preset("gla"), half = preset("gla"),
       d64 = preset("gla", 16, 64), narrowValues = preset("gla");
  writeGate.write = WriteWeight::Beta;
  writeGate.beta = BetaSource::Sigmoid;
  softplus.gate = GateSource::Softplus;
  normed.qkL2Norm = true;
  half.dtype = DType::F16;
  narrowValues.valueDim = 64;
  Spec kdaHalf = preset("kda"), kdaGates = preset("kda"),
       kdaD64 = preset("kda", 16, 64);
  kdaHalf.dtype = DType::F16;
  kdaGates.gate = GateSource::LowerBound;
  kdaGates.gateLowerBound = -5.0;
  kdaGates.beta = BetaSource::Sigmoid;
  return {{"write gate", writeGate},
          {"softplus gate", softplus},
          {"qk_l2norm", normed},
          {"f16", half},
          {"d64", d64},
          {"K 128, V 64", narrowValues},
          {"kda f16", kdaHalf},
          {"kda computed gate and beta", kdaGates},
          {"kda d64", kdaD64}};
}

// Their wgmma kernels are printed from the ops: a prepare kernel that
// stores the scan's operands with their factors and per-channel decays
// applied (X, K~, P, the state's decay), and a scan that takes v by TMA and
// the record by a bulk copy and applies nothing but the state's decay.
TEST(WgmmaScan, PrintsThePerChannelVariantsFromTheirOps) {
  for (auto [name, spec] : printedChannelRules()) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(canRunWgmmaScan(spec));
    Expected<KernelPlan> plan =
        planChunkKernel(spec, withWarpgroup(ScheduleOptions(), spec));
    ASSERT_TRUE(plan.ok()) << plan.message();
    expectPrintedPair(*plan);
    // X and K~ (64 x K each), P (64 x 64) and the decay (1 KB); the delta
    // rule's Y, T (64 x 64) and beta, v's factor in the residual (1 KB).
    const bool delta = spec.update == UpdateRule::Delta;
    EXPECT_EQ(plan->workspaceRecordFloats(),
              ((delta ? 3 : 2) * 64 * spec.keyDim * 2 +
               (delta ? 2 : 1) * 64 * 64 * 2 + (delta ? 2 : 1) * 1024) /
                  4);
    // bf16 inputs' scores are bf16 products, f16 inputs' tf32 ones; P's
    // box comes first, against k's rows.
    const bool bf16 = spec.dtype == DType::BF16;
    EXPECT_NE(plan->source.find(std::string("wg_channel_scores<K") +
                                (bf16 ? ", true" : "") +
                                ">(sm, sm.tiles[1], n,\n      "
                                "wg_box(sm.tiles[0], false,"),
              std::string::npos);
    // In bf16 the delta rule's A is P's second box (its left operand fits
    // beside P's); in tf32 the scores are summed one box at a time.
    const std::string prepare =
        plan->source.substr(0, plan->source.find("lina_chunk_split_scan("));
    size_t calls = 0;
    for (size_t at = prepare.find("  wg_channel_scores<K");
         at != std::string::npos;
         at = prepare.find("  wg_channel_scores<K", at + 1))
      ++calls;
    EXPECT_EQ(calls, delta && !bf16 ? 2u : 1u);
    const std::string scan =
        plan->source.substr(plan->source.find("lina_chunk_split_scan("));
    EXPECT_EQ(scan.find("wg_issue_scores"), std::string::npos);
    EXPECT_EQ(scan.find("wg_fetch_qkv"), std::string::npos);
    EXPECT_NE(scan.find("wg_decay_key_columns<K>(s,"), std::string::npos);
    if (delta) {
      // At d128 A takes q's tile, in its halves.
      EXPECT_NE(plan->source.find(
                    spec.keyDim == 128
                        ? "wg_unit_lower_inverse<kWgHalvesLd>(a, sm.right,"
                        : "wg_unit_lower_inverse(a, sm.right,"),
                std::string::npos);
      EXPECT_NE(prepare.find("wg_box(sm.tiles[1], true,"), std::string::npos);
      EXPECT_NE(scan.find("wg_issue_values_update<K>(s, uf, rec + "),
                std::string::npos);
    }
    // The default for the delta rule at d128 (faster than the split
    // kernels at fla's shapes on an H100), in value tiles on eight warps
    // where two CTAs a head fit; for GLA's bf16 spellings at d128 where the
    // heads give between a quarter and one and a half of the SMs a CTA (as
    // the preset); its f16 spellings stay on the split kernels (untimed).
    const bool d128 = spec.keyDim == 128 && spec.valueDim == 128;
    // One sequence of 16 heads: two CTAs a head fit in 132 SMs.
    ScheduleOptions few = defaultSchedule(spec, 1, 132, 8192, "sm_90");
    // Six of 16: 96 heads, whole.
    ScheduleOptions many = defaultSchedule(spec, 6, 132, 8192, "sm_90");
    EXPECT_EQ(few.warpgroup, delta && d128);
    EXPECT_EQ(many.warpgroup, d128 && (delta || spec.dtype == DType::BF16));
    if (few.warpgroup) {
      EXPECT_EQ(few.tileV, 64);
      EXPECT_EQ(few.warps, 8);
    }
    if (many.warpgroup) {
      EXPECT_EQ(many.tileV, 128);
      EXPECT_EQ(many.warps, 8);
      EXPECT_TRUE(planChunkKernel(spec, many).ok());
    }
  }
}

/// DPLR with free a and b (RWKV-7's rule) as the preset spells it and
/// otherwise: with a write weight, in f16, at d64 and with K != V.
static std::vector<std::pair<const char *, Spec>> printedDplrRules() {
  Spec writeGate = preset("rwkv7"), half = preset("rwkv7"),
       d64 = preset("rwkv7", 16, 64), narrowValues = preset("rwkv7"),
       narrowKeys = preset("rwkv7"), scalar = preset("rwkv7"),
       fixed = preset("rwkv7"), none = preset("rwkv7"),
       betaKey = preset("rwkv7"), negDecayedA = preset("rwkv7");
  negDecayedA.lowRankA = LowRankSource::NegDecayedKey;
  scalar.decay = DecayKind::Scalar;
  fixed.decay = DecayKind::FixedPerHead;
  none.decay = DecayKind::None;
  betaKey.lowRankB = LowRankSource::BetaKey;
  betaKey.beta = BetaSource::Sigmoid;
  writeGate.write = WriteWeight::Beta;
  writeGate.beta = BetaSource::Sigmoid;
  half.dtype = DType::F16;
  narrowValues.valueDim = 64;
  narrowKeys.keyDim = 64;
  return {{"rwkv7", preset("rwkv7")},
          {"write gate", writeGate},
          {"f16", half},
          {"d64", d64},
          {"K 128, V 64", narrowValues},
          {"K 64, V 128", narrowKeys},
          {"scalar decay", scalar},
          {"fixed decay", fixed},
          {"no decay", none},
          {"b = beta k", betaKey},
          {"a = -(exp(g) k)", negDecayedA}};
}

// DPLR's kernels are the per-channel pair with the low-rank terms: the
// prepare kernel fetches a and b too and stores Y (a decayed to the row
// before), B~, K~, T = (I - A)^-1, L, both P's, X and the decay; the scan
// adds L V onto Y S for the residual, solves it, and writes U along b and
// v along k. At key dim 128 the record leaves room for 64-column tiles.
TEST(WgmmaScan, PrintsDplrWithFreeAAndB) {
  for (auto [name, spec] : printedDplrRules()) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(canRunWgmmaScan(spec));
    const ScheduleOptions schedule = withWarpgroup(ScheduleOptions(), spec);
    EXPECT_EQ(schedule.tileV, spec.keyDim == 128 ? 64 : spec.valueDim);
    Expected<KernelPlan> plan = planChunkKernel(spec, schedule);
    ASSERT_TRUE(plan.ok()) << plan.message();
    expectPrintedPair(*plan);
    // X, Y, B~ and K~ (64 x K each), T, L and the two P's (64 x 64) and
    // the decay (1 KB; none without one).
    const bool decayed = spec.decay != DecayKind::None;
    EXPECT_EQ(
        plan->workspaceRecordFloats(),
        (4 * 64 * spec.keyDim * 2 + 4 * 64 * 64 * 2 + (decayed ? 1024 : 0)) /
            4);
    EXPECT_NE(plan->source.find("wg_channel_smem<K, 4> &sm"),
              std::string::npos);
    // A's and L's left rows decay to the row before (a's), or, for
    // -(exp(g) k), as -k to the row itself. The scores against one right
    // operand are summed in one pass, tf32 products in two fp32 left
    // operands: P then A against b's rows, L then v's P against k's.
    const bool input = spec.lowRankA == LowRankSource::Input;
    const std::string aRows = input ? "sm.tiles[2]" : "sm.tiles[1]";
    const std::string bRows =
        spec.lowRankB == LowRankSource::BetaKey ? "sm.tiles[1]" : "sm.tiles[3]";
    const std::string aBox =
        (decayed && input ? "wg_box_before(" : "wg_box(") + aRows + ", true,";
    const std::string prepare =
        plan->source.substr(0, plan->source.find("lina_chunk_split_scan("));
    const std::string pBox = "wg_channel_scores<K>(sm, " + bRows +
                             ", n,\n      wg_box(sm.tiles[0], false,";
    const size_t pAndA = prepare.find(pBox);
    ASSERT_NE(pAndA, std::string::npos);
    // A is P's second box: the next box printed.
    EXPECT_EQ(prepare.find("\n      " + aBox, pAndA),
              prepare.find("\n      wg_", pAndA + pBox.size()));
    EXPECT_NE(
        prepare.find("wg_channel_scores<K>(sm, sm.tiles[1], n,\n      " + aBox),
        std::string::npos);
    size_t calls = 0;
    for (size_t at = prepare.find("  wg_channel_scores<K");
         at != std::string::npos;
         at = prepare.find("  wg_channel_scores<K", at + 1))
      ++calls;
    EXPECT_EQ(calls, 2u);
    const std::string scan =
        plan->source.substr(plan->source.find("lina_chunk_split_scan("));
    EXPECT_NE(scan.find("wg_issue_intra(yacc, vt, rec + "), std::string::npos);
    EXPECT_NE(scan.find("wg_pack_columns(rf, yacc,"), std::string::npos);
    EXPECT_NE(scan.find("wg_issue_values_update<K>(s, uf, rec + "),
              std::string::npos);
    EXPECT_EQ(scan.find("wg_decay_key_columns") != std::string::npos, decayed);
    // The default in bf16 at d128, on few heads or many, a 64-column tile
    // on eight warps (faster than the split kernels at fla's shapes on an
    // H100); f16 and d64 keep the split kernels (not timed against them),
    // as does every GPU before Hopper.
    const bool printedDefault =
        spec.dtype == DType::BF16 && spec.keyDim == 128 && spec.valueDim == 128;
    Spec many = spec;
    many.heads = many.valueHeads = 96;
    for (const Spec &s : {spec, many}) {
      const ScheduleOptions d = defaultSchedule(s, 1, 132, 8192, "sm_90");
      EXPECT_EQ(d.warpgroup, printedDefault);
      if (printedDefault) {
        EXPECT_EQ(d.tileV, 64);
        EXPECT_EQ(d.warps, 8);
      }
      EXPECT_FALSE(defaultSchedule(s, 1, 132, 8192, "sm_80").warpgroup);
    }
  }
}

TEST(WgmmaScan, RefusesOtherRulesAndLayoutsByName) {
  struct Case {
    Spec spec;
    ScheduleOptions schedule;
    const char *names;
  };
  Spec f32 = preset("mamba2"), kdaF32 = preset("kda"),
       negDecayed = preset("rwkv7");
  f32.dtype = kdaF32.dtype = DType::F32;
  negDecayed.lowRankB = LowRankSource::NegDecayedKey;
  auto with = [](auto change) {
    ScheduleOptions s = wgmmaSchedule();
    change(s);
    return s;
  };
  std::vector<Case> cases = {
      {preset("gla"), with([](auto &s) { s.segments = 4; }),
       "segments only for the additive rule with at most a scalar decay"},
      // DPLR's record leaves room for a 64-column tile at key dim 128.
      {preset("rwkv7"), wgmmaSchedule(), "runs tile-v 64 on 4 warps"},
      {negDecayed, wgmmaSchedule(), "(low_rank_b = neg_decayed_key) aside"},
      {f32, wgmmaSchedule(), "dtype must be bf16 or f16"},
      {kdaF32, wgmmaSchedule(), "dtype must be bf16 or f16"},
      // KDA's printed pair: a whole head or a 64-column tile of one.
      {preset("kda"), with([](auto &s) { s.tileV = 32; }),
       "tile-v 128 or 64, and 4 warps for each 64 columns of the tile (got "
       "64, 32 and 8 warps)"},
      {preset("mamba2", 16, 256), wgmmaSchedule(),
       "key_dim and value_dim must be 64 or 128"},
      // A d64 head is one warpgroup: four warps.
      {preset("mamba2", 16, 64), with([](auto &s) { s.tileV = 64; }),
       "tile-v 64, and 4 warps for each 64 columns of the tile (got 64, 64 "
       "and 8 warps)"},
      {preset("mamba2"), with([](auto &s) { s.chunkSize = 16; }),
       "chunk size 64"},
      {preset("mamba2"), with([](auto &s) { s.tileV = 64; }),
       "tile-v 128 or 64"},
      {preset("mamba2"), with([](auto &s) { s.warps = 4; }),
       "(got 64, 128 and 4 warps)"},
      {preset("mamba2"), with([](auto &s) { s.strategy = Strategy::Split; }),
       "strategy must be fused"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.names);
    Expected<KernelPlan> plan = planChunkKernel(c.spec, c.schedule);
    ASSERT_FALSE(plan.ok());
    // Each names the knob: "mma warpgroup: ...", or "... with mma warp".
    EXPECT_NE(plan.message().find("mma warp"), std::string::npos)
        << plan.message();
    EXPECT_NE(plan.message().find(c.names), std::string::npos)
        << plan.message();
  }
}

// canRunWgmmaScan (the spec's predicate, which the tuner and the default
// ask) and the planner's refusal agree on every preset, dtype and dim.
TEST(WgmmaScan, ThePredicateAgreesWithThePlanner) {
  for (const Preset &p : presets())
    for (DType dtype : {DType::BF16, DType::F16, DType::F32})
      for (int64_t dim : {64, 128}) {
        Spec spec = preset(p.name, 2, dim);
        spec.dtype = dtype;
        // (The layout withWarpgroup gives the spec: tile-v 64 on 4 warps for
        // the printed scan at d64, tile-v 128 elsewhere, which lina-schedule
        // refuses wider than a d64 head.)
        ScheduleOptions s = withWarpgroup(ScheduleOptions(), spec);
        if (s.tileV > dim)
          s.tileV = dim;
        bool planned = planChunkKernel(spec, s).ok();
        EXPECT_EQ(canRunWgmmaScan(spec), planned)
            << p.name << " " << toString(dtype) << " d" << dim;
      }
}

// NVRTC compiles the kernel for sm_90a (the arch kernelArch gives an sm_90
// GPU) with ptxas's report: no spills, and the one CTA an SM it is planned
// for (launch bounds 256, 1). For sm_90 without the 'a' the kernel's
// static_assert names the fix.
/// How often `kernel`'s PTX (compute_90a) waits at or signals each barrier
/// with an immediate ID, as "sync 0" / "arrive 3" (a register ID is
/// wg_store_output's own 128 threads).
static void countBarriers(const KernelPlan &plan, const std::string &kernel,
                          std::map<std::string, int> &uses) {
  cuda::CompileOptions options;
  options.arch = "compute_90a";
  Expected<cuda::CompiledKernel> ptx =
      cuda::Nvrtc::get().compile(plan.source, options);
  ASSERT_TRUE(ptx.ok()) << ptx.message();
  const std::string entry = ".entry " + kernel + "(";
  size_t begin = ptx->cubin.find(entry);
  ASSERT_NE(begin, std::string::npos) << entry;
  size_t end = ptx->cubin.find(".entry ", begin + entry.size());
  std::istringstream body(ptx->cubin.substr(begin, end - begin));
  const std::regex barrier(R"(^\s*bar\.(sync|arrive)\s+(\d+))");
  std::smatch m;
  for (std::string line; std::getline(body, line);)
    if (std::regex_search(line, m, barrier))
      ++uses[m[1].str() + " " + m[2].str()];
}

// The per-channel presets' default on few heads is a 64-column value tile
// on eight warps: the scan's second warpgroup, there for the prepare
// kernel's eight warps, leaves at once, so the first may meet only where
// compute-sanitizer's synccheck allows it: barrier 0 once, before the
// second leaves (the TMA barriers' setup), then its own named barrier. A
// __syncthreads in the loop, which synccheck reported as divergent threads
// (docs/reliability.md), fails this.
TEST(WgmmaScan, ThePerChannelPresetsTilesMeetOnlyAtOneWaySignals) {
  const cuda::Nvrtc &nvrtc = cuda::Nvrtc::get();
  if (!nvrtc.available())
    GTEST_SKIP() << nvrtc.status().message();
  for (const char *name : kTwoKernels) {
    SCOPED_TRACE(name);
    // 4 x 16 heads: two CTAs a head fit in 132 SMs.
    const Spec spec = preset(name, 16);
    const ScheduleOptions tiles = defaultSchedule(spec, 4, 132, 2048, "sm_90");
    ASSERT_TRUE(tiles.warpgroup);
    ASSERT_EQ(tiles.tileV, 64);
    ASSERT_EQ(tiles.warps, 8);
    Expected<KernelPlan> plan = planChunkKernel(spec, tiles);
    ASSERT_TRUE(plan.ok()) << plan.message();
    EXPECT_EQ(plan->valueTiles(), 2);
    std::map<std::string, int> uses;
    ASSERT_NO_FATAL_FAILURE(countBarriers(*plan, plan->scanKernel, uses));
    // Warpgroup 1 leaves at once: warpgroup 0 meets only its own, where
    // the stage has landed and, GLA's, where v's rows past n are zeroed
    // (the additive rule's products read v's tile as it is).
    const bool delta = std::string(name) == "kda";
    const std::map<std::string, int> expected = {{"sync 0", 1},
                                                 {"sync 6", delta ? 1 : 2}};
    EXPECT_EQ(uses, expected);
  }
}

// A printed delta rule's 64-column value tile on eight warps: the second
// warpgroup forms the scores (WarpgroupScan::scoresApart). Both kernels
// compile for sm_90a without spills, one scan CTA an SM; the warpgroups
// meet only where synccheck allows: barrier 0 once before the loops, each
// signal (3: the stage landed, 4: q's norms, 5: P) arrived at from one
// place and waited at from one other, and each warpgroup's own barrier (6,
// 7: the norms within the scores' warpgroup, where the kernel normalises
// q) from one. A per-channel decay's tile and DPLR's take the eight warps
// for their prepare kernel, whose scan lets the second warpgroup go at
// once and meets at its own barrier (6) alone. The additive rule with at
// most a scalar decay, which prepares nothing, is refused that layout by
// name.
TEST(WgmmaScan, ScoresApartMeetOnlyAtOneWaySignals) {
  const cuda::Nvrtc &nvrtc = cuda::Nvrtc::get();
  if (!nvrtc.available())
    GTEST_SKIP() << nvrtc.status().message();
  ScheduleOptions apart = wgmmaSchedule();
  apart.tileV = 64;
  apart.warps = 8;
  std::vector<std::pair<const char *, Spec>> rules = printedDeltaRules();
  Spec plain = preset("gdn");
  plain.dtype = DType::F16;
  plain.qkL2Norm = false;
  rules.push_back({"f16, q and k as they come", plain});
  for (auto [name, spec] : rules) {
    SCOPED_TRACE(name);
    Report report;
    ASSERT_NO_FATAL_FAILURE(compileWithReport(spec, apart, report));
    EXPECT_EQ(report.plan.threads, 256);
    ASSERT_EQ(report.kernels.size(), 2u) << report.log;
    for (const cuda::KernelResources &k : report.kernels)
      EXPECT_EQ(k.spillStoreBytes, 0) << k.kernel << "\n" << report.log;
    EXPECT_NE(
        report.plan.source.find("wg_issue_scores<K, 1>(pacc, qt, kt, 0);"),
        std::string::npos);
    Expected<KernelPlan> plan = planChunkKernel(spec, apart);
    ASSERT_TRUE(plan.ok()) << plan.message();
    std::map<std::string, int> uses;
    ASSERT_NO_FATAL_FAILURE(countBarriers(*plan, plan->scanKernel, uses));
    std::map<std::string, int> expected = {
        {"sync 0", 1}, {"arrive 3", 1}, {"sync 3", 1}, {"arrive 4", 1},
        {"sync 4", 1}, {"arrive 5", 1}, {"sync 5", 1}, {"sync 6", 1}};
    if (spec.qkL2Norm)
      expected["sync 7"] = 1;
    EXPECT_EQ(uses, expected);
  }
  std::vector<std::pair<const char *, Spec>> idle = printedChannelRules();
  for (auto rule : printedDplrRules())
    idle.push_back(rule);
  for (auto [name, spec] : idle) {
    SCOPED_TRACE(name);
    Report report;
    ASSERT_NO_FATAL_FAILURE(compileWithReport(spec, apart, report));
    ASSERT_EQ(report.kernels.size(), 2u) << report.log;
    for (const cuda::KernelResources &k : report.kernels)
      EXPECT_EQ(k.spillStoreBytes, 0) << k.kernel << "\n" << report.log;
    const std::string &source = report.plan.source;
    const size_t scan = source.find("lina_chunk_split_scan(");
    ASSERT_NE(scan, std::string::npos);
    EXPECT_NE(source.find("  if (wg == W)\n    return;\n", scan),
              std::string::npos);
    EXPECT_EQ(source.find("__syncthreads();", scan), std::string::npos);
    EXPECT_NE(source.find("cta_sync_at<6, 128 * W>();", scan),
              std::string::npos);
  }
  Expected<KernelPlan> additive = planChunkKernel(preset("retnet"), apart);
  ASSERT_FALSE(additive.ok());
  EXPECT_NE(additive.message().find(
                "8 warps on a 64-column tile only for the rules with a "
                "prepare kernel (the delta rule, DPLR, a per-channel decay)"),
            std::string::npos)
      << additive.message();
}

TEST(WgmmaScan, CompilesForSm90aWithoutSpills) {
  const cuda::Nvrtc &nvrtc = cuda::Nvrtc::get();
  if (!nvrtc.available())
    GTEST_SKIP() << nvrtc.status().message();
  std::vector<std::pair<const char *, Spec>> fused = weightedAndComputed();
  for (const char *name : kEligible)
    fused.push_back({name, preset(name)});
  // The printed scan at other dims: one warpgroup a d64 head, K != V.
  Spec d64 = preset("mamba2", 16, 64), narrowKeys = preset("retnet"),
       narrowValues = preset("linear_attn");
  narrowKeys.keyDim = 64;
  narrowValues.valueDim = 64;
  fused.push_back({"mamba2 d64", d64});
  // In f16 the products take f16 operands (wgmma's .f16 form).
  Spec half = preset("retnet"), halfD64 = d64;
  half.dtype = halfD64.dtype = DType::F16;
  fused.push_back({"retnet f16", half});
  fused.push_back({"mamba2 d64 f16", halfD64});
  fused.push_back({"retnet K 64, V 128", narrowKeys});
  fused.push_back({"linear_attn K 128, V 64", narrowValues});
  // The printed delta and per-channel kernels: the prepare kernel and the
  // scan, no spills; the per-channel prepare kernel (not DPLR's, with its
  // two more tiles) two CTAs an SM at d128.
  std::vector<std::pair<const char *, Spec>> prepared = printedDeltaRules();
  for (auto rule : printedChannelRules())
    prepared.push_back(rule);
  for (auto rule : printedDplrRules())
    prepared.push_back(rule);
  for (auto [name, spec] : prepared) {
    SCOPED_TRACE(name);
    Report report;
    ASSERT_NO_FATAL_FAILURE(compileWithReport(
        spec, withWarpgroup(ScheduleOptions(), spec), report));
    ASSERT_EQ(report.kernels.size(), 2u) << report.log;
    for (const cuda::KernelResources &k : report.kernels) {
      EXPECT_EQ(k.spillStoreBytes, 0) << k.kernel << "\n" << report.log;
      if (k.kernel == report.plan.prepareKernel &&
          spec.decay == DecayKind::PerChannel &&
          spec.update != UpdateRule::DPLR && spec.keyDim == 128) {
        EXPECT_GE(cuda::ctasPerMultiprocessor(k.registers, report.plan.threads,
                                              report.plan.prepareSharedBytes),
                  2)
            << k.kernel << "\n"
            << report.log;
      }
    }
  }
  for (auto [name, spec] : fused) {
    SCOPED_TRACE(name);
    Report report;
    ASSERT_NO_FATAL_FAILURE(compileWithReport(
        spec, withWarpgroup(ScheduleOptions(), spec), report));
    ASSERT_EQ(kernelArch(report.plan, "sm_90"), "sm_90a");
    ASSERT_EQ(report.kernels.size(), 1u) << report.log;
    EXPECT_EQ(report.kernels[0].spillStoreBytes, 0) << report.log;
    // A CTA of two warpgroups an SM at V 128; a d64 head's smaller tiles
    // leave room for more (at K 128, V 64 two CTAs' tiles need more than
    // an SM's 228 KB).
    const int threads = 2 * static_cast<int>(spec.valueDim);
    EXPECT_EQ(report.plan.threads, threads);
    const int ctas = cuda::ctasPerMultiprocessor(
        report.kernels[0].registers, threads, report.plan.scanSharedBytes);
    if (spec.valueDim == 128)
      EXPECT_EQ(ctas, 1);
    else if (spec.keyDim == 64)
      EXPECT_GE(ctas, 2);
    else
      EXPECT_GE(ctas, 1);
  }
  // KDA's and GLA's presets, whole heads and the 64-column tile on eight
  // warps of their default on few heads: the scan one CTA an SM, the
  // prepare kernel two (its ~112 KB of dynamic shared memory).
  for (const char *name : kTwoKernels) {
    ScheduleOptions tiles = wgmmaSchedule();
    tiles.tileV = 64;
    for (const ScheduleOptions &schedule : {wgmmaSchedule(), tiles}) {
      SCOPED_TRACE(std::string(name) + " tile-v " +
                   std::to_string(schedule.tileV));
      Report report;
      ASSERT_NO_FATAL_FAILURE(
          compileWithReport(preset(name), schedule, report));
      ASSERT_EQ(report.kernels.size(), 2u) << report.log;
      int scans = 0;
      for (const cuda::KernelResources &k : report.kernels) {
        EXPECT_EQ(k.spillStoreBytes, 0) << k.kernel << "\n" << report.log;
        const bool scan = k.kernel == report.plan.scanKernel;
        scans += scan;
        const unsigned shared =
            scan ? report.plan.scanSharedBytes : report.plan.prepareSharedBytes;
        EXPECT_EQ(cuda::ctasPerMultiprocessor(k.registers, 256, shared),
                  scan ? 1 : 2)
            << k.kernel;
      }
      EXPECT_EQ(scans, 1) << report.log;
    }
  }
  Expected<KernelPlan> plan =
      planChunkKernel(preset("mamba2"), wgmmaSchedule());
  ASSERT_TRUE(plan.ok());
  cuda::CompileOptions plain;
  plain.arch = "sm_90";
  Expected<cuda::CompiledKernel> refused = nvrtc.compile(plan->source, plain);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("needs sm_90a"), std::string::npos)
      << refused.message();
  // Another GPU's arch is left alone (ChunkKernel refuses the plan there).
  EXPECT_EQ(kernelArch(*plan, "sm_80"), "sm_80");
}

// The default on an sm_90 GPU where the heads give more than a quarter of
// the SMs a CTA; segments below that, and never without the arch or for
// rules the kernel does not cover.
TEST(WgmmaScan, DefaultOnHopperWhereTheHeadsFillTheGpu) {
  const int64_t h200 = 132;
  for (const char *name : kEligible) {
    SCOPED_TRACE(name);
    ScheduleOptions large =
        defaultSchedule(preset(name, 96), 1, h200, 8192, "sm_90");
    EXPECT_TRUE(large.warpgroup);
    EXPECT_EQ(large.strategy, Strategy::FusedScan);
    EXPECT_EQ(large.chunkSize, 64);
    EXPECT_EQ(large.tileV, 128);
    EXPECT_EQ(large.warps, 8);
    EXPECT_TRUE(large.prefetch);
    EXPECT_TRUE(planChunkKernel(preset(name, 96), large).ok());
    EXPECT_TRUE(
        defaultSchedule(preset(name, 16), 4, h200, 2048, "sm_90").warpgroup);
    // 32 heads: a CTA a head would idle three quarters of the GPU; the
    // rules with a decay run pieces through it (below), linear attention
    // keeps the split scan.
    if (!canRunInSegments(preset(name))) {
      EXPECT_FALSE(
          defaultSchedule(preset(name, 16), 2, h200, 16384, "sm_90").warpgroup);
    }
    EXPECT_FALSE(defaultSchedule(preset(name, 96), 1, h200, 8192).warpgroup);
    EXPECT_FALSE(
        defaultSchedule(preset(name, 96), 1, h200, 8192, "sm_80").warpgroup);
    EXPECT_FALSE(defaultSchedule(preset(name, 96)).warpgroup);
  }
  // rwkv7 (DPLR, bf16, d128) takes its printed pair at any grid, a
  // 64-column tile on eight warps (PrintsDplrWithFreeAAndB).
  EXPECT_TRUE(
      defaultSchedule(preset("rwkv7", 96), 1, h200, 8192, "sm_90").warpgroup);
  EXPECT_TRUE(
      defaultSchedule(preset("rwkv7", 16), 2, h200, 16384, "sm_90").warpgroup);
  // GLA's printed pair (no segments) where the heads fill the GPU up to
  // one and a half CTAs an SM, whole heads, and a 64-column tile on eight
  // warps where two CTAs a head still fit in the SMs; below that its split
  // scan's segments stay the default, above it its split scan.
  ScheduleOptions twice =
      defaultSchedule(preset("gla", 96), 2, h200, 8192, "sm_90");
  EXPECT_TRUE(twice.warpgroup);
  EXPECT_EQ(twice.tileV, 128);
  EXPECT_FALSE(
      defaultSchedule(preset("gla", 64), 4, h200, 4096, "sm_90").warpgroup);
  ScheduleOptions gla =
      defaultSchedule(preset("gla", 96), 1, h200, 8192, "sm_90");
  EXPECT_TRUE(gla.warpgroup);
  EXPECT_EQ(gla.segments, 1);
  EXPECT_EQ(gla.tileV, 128);
  EXPECT_EQ(gla.warps, 8);
  Expected<KernelPlan> glaPlan = planChunkKernel(preset("gla", 96), gla);
  ASSERT_TRUE(glaPlan.ok()) << glaPlan.message();
  expectPrintedPair(*glaPlan);
  // 40 and 66 heads: two CTAs a head fit in 132 SMs; 67: no longer.
  for (auto [heads, tileV] :
       {std::pair<int64_t, int64_t>{66, 64}, {67, 128}, {40, 64}}) {
    ScheduleOptions s =
        defaultSchedule(preset("gla", heads), 1, h200, 8192, "sm_90");
    EXPECT_TRUE(s.warpgroup) << heads << " heads";
    EXPECT_EQ(s.tileV, tileV) << heads << " heads";
    EXPECT_EQ(s.warps, 8) << heads << " heads";
    EXPECT_TRUE(planChunkKernel(preset("gla", heads), s).ok())
        << heads << " heads";
  }
  ScheduleOptions few =
      defaultSchedule(preset("gla", 16), 2, h200, 16384, "sm_90");
  EXPECT_FALSE(few.warpgroup);
  EXPECT_GT(few.segments, 1);
  EXPECT_TRUE(planChunkKernel(preset("gla", 16), few).ok());
  // d64 heads take it at any grid, one warpgroup a head (it beat the
  // split scan at fla's shapes and with few heads, where d128's segments
  // win), for every additive rule with at most a scalar decay, in bf16 and
  // f16; off Hopper, and for GLA's per-channel decay, the split kernels.
  for (const char *name : {"mamba2", "retnet", "linear_attn"})
    for (DType dtype : {DType::BF16, DType::F16})
      for (auto [heads, sequences, tokens] :
           {std::tuple<int64_t, int64_t, int64_t>{8, 8, 1024},
            {96, 1, 8192},
            {16, 2, 16384}}) {
        SCOPED_TRACE(std::string(name) + " " + toString(dtype) + " " +
                     std::to_string(heads) + " heads");
        Spec spec = preset(name, heads, 64);
        spec.dtype = dtype;
        ScheduleOptions d64 =
            defaultSchedule(spec, sequences, h200, tokens, "sm_90");
        EXPECT_TRUE(d64.warpgroup);
        EXPECT_EQ(d64.tileV, 64);
        EXPECT_EQ(d64.warps, 4);
        EXPECT_EQ(d64.segments, 1);
        Expected<KernelPlan> plan = planChunkKernel(spec, d64);
        ASSERT_TRUE(plan.ok()) << plan.message();
        EXPECT_TRUE(plan->needsSm90a);
        EXPECT_FALSE(
            defaultSchedule(spec, sequences, h200, tokens, "sm_80").warpgroup);
      }
  EXPECT_FALSE(
      defaultSchedule(preset("gla", 96, 64), 1, h200, 8192, "sm_90").warpgroup);
}

// The additive rules with a decay (mamba2, retnet) run few long sequences
// as pieces through the wgmma scan, a CTA an SM (twice that for packed
// sequences); its records feed the split strategy's combine and carry.
TEST(WgmmaScan, PlansPiecesOfFewLongSequences) {
  const int64_t h200 = 132;
  for (const char *name : {"mamba2", "retnet"}) {
    SCOPED_TRACE(name);
    ScheduleOptions s =
        defaultSchedule(preset(name, 16), 2, h200, 16384, "sm_90");
    EXPECT_TRUE(s.warpgroup);
    EXPECT_EQ(s.segments, 4); // 128 CTAs on 132 SMs
    EXPECT_EQ(
        defaultSchedule(preset(name, 16), 1, h200, 16384, "sm_90").segments, 8);
    Spec packed = preset(name, 16);
    packed.varlen = true;
    EXPECT_EQ(defaultSchedule(packed, 2, h200, 20768, "sm_90").segments, 8);
    // Off Hopper the split strategy's pieces stay.
    ScheduleOptions split =
        defaultSchedule(preset(name, 16), 2, h200, 16384, "sm_80");
    EXPECT_FALSE(split.warpgroup);
    EXPECT_EQ(split.strategy, Strategy::Split);
    EXPECT_EQ(split.segments, 8);

    Expected<KernelPlan> plan = planChunkKernel(preset(name, 16), s);
    ASSERT_TRUE(plan.ok()) << plan.message();
    EXPECT_TRUE(plan->needsSm90a);
    EXPECT_EQ(plan->strategy, Strategy::Split);
    EXPECT_EQ(plan->segments, 4);
    EXPECT_TRUE(plan->prepareKernel.empty());
    EXPECT_EQ(plan->combineKernel, "lina_segment_combine");
    EXPECT_EQ(plan->carryKernel, "lina_segment_carry");
    EXPECT_EQ(plan->segmentGateColumns, 1);
    EXPECT_EQ(plan->workspaceRecordFloats(), 64 * 128 / 2 + 4);
    EXPECT_NE(plan->source.find("#define LINA_SEGMENTS 1"), std::string::npos);
    // The scan printed from the ops stores each chunk's record: X (q's
    // rows with the state product's factors) and the state's decay.
    const KernelPlan *printed = &*plan;
    // X's rows read the output's row factors, tabulated once a row.
    EXPECT_NE(printed->source.find("wg_column_rows(n, [&](int r) { "
                                   "return __expf(tab1[r]) * "),
              std::string::npos);
    EXPECT_NE(printed->source.find("wg_store_rows<K>(rec, qt, n, [&](int r) { "
                                   "return ftab0[r]; });"),
              std::string::npos);
    EXPECT_NE(printed->source.find("rec[C * K / 2] = __expf(last1);"),
              std::string::npos);
  }
  // Without a decay there is nothing to carry: refused with the reason.
  ScheduleOptions pieces = wgmmaSchedule();
  pieces.segments = 4;
  Expected<KernelPlan> refused = planChunkKernel(preset("linear_attn"), pieces);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("segments"), std::string::npos)
      << refused.message();
  // The scan, its combine and its carry compile for sm_90a without spills
  // (the carry's ring of 64-token chunks: one CTA an SM).
  const cuda::Nvrtc &nvrtc = cuda::Nvrtc::get();
  if (!nvrtc.available())
    GTEST_SKIP() << nvrtc.status().message();
  Report report;
  ASSERT_NO_FATAL_FAILURE(compileWithReport(preset("mamba2"), pieces, report));
  ASSERT_EQ(report.kernels.size(), 3u) << report.log;
  for (const cuda::KernelResources &k : report.kernels)
    EXPECT_EQ(k.spillStoreBytes, 0) << k.kernel << "\n" << report.log;
}

// The delta rules take it on an sm_90 GPU at any grid (they cannot run in
// segments, and one wgmma CTA a head beat the split scan's four even at 8
// heads), a CTA a 64-column value tile on eight warps where two CTAs a
// head fit in the SMs, never without the arch, and never past what the
// kernel covers.
TEST(WgmmaScan, DefaultForTheDeltaRulesOnHopperAtAnyGrid) {
  const int64_t h200 = 132;
  for (const char *name : kEligibleDelta) {
    SCOPED_TRACE(name);
    for (auto [heads, sequences, tokens] :
         {std::tuple<int64_t, int64_t, int64_t>{96, 1, 8192},
          {16, 2, 16384},
          {8, 1, 32768}}) {
      ScheduleOptions s = defaultSchedule(preset(name, heads), sequences, h200,
                                          tokens, "sm_90");
      EXPECT_TRUE(s.warpgroup) << heads << " heads";
      EXPECT_EQ(s.tileV, 2 * heads * sequences <= h200 ? 64 : 128)
          << heads << " heads";
      EXPECT_EQ(s.warps, 8) << heads << " heads";
      Expected<KernelPlan> plan = planChunkKernel(preset(name, heads), s);
      ASSERT_TRUE(plan.ok()) << plan.message();
      expectPrintedPair(*plan);
    }
    EXPECT_FALSE(
        defaultSchedule(preset(name, 96), 1, h200, 8192, "sm_80").warpgroup);
    // d64: the printed delta kernels for gdn and DeltaNet; not KDA's pair.
    EXPECT_EQ(
        defaultSchedule(preset(name, 16, 64), 8, h200, 1024, "sm_90").warpgroup,
        std::string(name) != "kda");
  }
  // A gate computed in the kernel (fla's use_gate_in_kernel): the default
  // plans the per-channel kernels printed from the ops, which compute it
  // (faster than the split kernels on an H100).
  for (GateSource gate : {GateSource::Softplus, GateSource::LowerBound}) {
    Spec computed = preset("kda", 96);
    computed.gate = gate;
    ASSERT_TRUE(canRunWgmmaScan(computed)) << toString(gate);
    ScheduleOptions s = defaultSchedule(computed, 1, h200, 8192, "sm_90");
    EXPECT_TRUE(s.warpgroup) << toString(gate);
    EXPECT_TRUE(planChunkKernel(computed, s).ok()) << toString(gate);
  }
}

// The delta rules as no preset spells them run their printed kernels by
// default, in value tiles where two CTAs a head fit in the SMs, at d128,
// and at d64 with whole heads; KDA at d64 the mma.sync kernels.
TEST(WgmmaScan, DefaultForThePrintedDeltaKernelsInValueTilesOnFewHeads) {
  const int64_t h200 = 132;
  Spec half = preset("gdn", 96);
  half.dtype = DType::F16;
  Spec computed = preset("gdn", 96);
  computed.gate = GateSource::Softplus;
  Spec fixed = preset("gdn", 96);
  fixed.decay = DecayKind::FixedPerHead;
  for (auto [name, spec] : {std::pair<const char *, Spec>{"f16", half},
                            {"computed gate", computed},
                            {"fixed decay", fixed}}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(canRunWgmmaScan(spec));
    // 96 heads: a CTA a whole head.
    ScheduleOptions s = defaultSchedule(spec, 1, h200, 8192, "sm_90");
    EXPECT_TRUE(s.warpgroup);
    EXPECT_EQ(s.tileV, 128);
    Expected<KernelPlan> plan = planChunkKernel(spec, s);
    ASSERT_TRUE(plan.ok()) << plan.message();
    EXPECT_NE(plan->source.find("wg_issue_solve(uacc, rf,"), std::string::npos);
    // 4 x 16, 2 x 16 and 1 x 16 heads: two CTAs a head fit in 132 SMs, a
    // CTA a 64-column value tile on eight warps (the scores on the second
    // warpgroup), which the plan launches for both kernels.
    Spec sixteen = spec;
    sixteen.heads = sixteen.valueHeads = 16;
    for (int64_t sequences : {4, 2, 1}) {
      ScheduleOptions few =
          defaultSchedule(sixteen, sequences, h200, 2048, "sm_90");
      EXPECT_TRUE(few.warpgroup);
      EXPECT_EQ(few.tileV, 64);
      EXPECT_EQ(few.warps, 8);
    }
    Expected<KernelPlan> tiles = planChunkKernel(
        sixteen, defaultSchedule(sixteen, 1, h200, 16384, "sm_90"));
    ASSERT_TRUE(tiles.ok()) << tiles.message();
    EXPECT_EQ(tiles->threads, 256);
    EXPECT_EQ(tiles->valueTiles(), 2);
    EXPECT_NE(tiles->source.find("constexpr int K = 128, V = 128, VT = 64, W "
                                 "= 1, C = 64;"),
              std::string::npos);
    EXPECT_NE(tiles->source.find("wg_fetch_qkv<K, VT>(at, maps, kh, hv, "
                                 "(int)t0, &landed[stage], v0);"),
              std::string::npos);
    EXPECT_NE(tiles->source.find("__launch_bounds__(256) lina_chunk_prepare("),
              std::string::npos);
    EXPECT_NE(tiles->source.find("wg_issue_scores<K, 1>(pacc, qt, kt, 0);"),
              std::string::npos);
    // d64: whole heads, a warpgroup for the 64 value columns, at any grid.
    Spec d64 = spec;
    d64.keyDim = d64.valueDim = 64;
    for (auto [heads, sequences] :
         {std::pair<int64_t, int64_t>{96, 1}, {16, 4}, {16, 1}}) {
      d64.heads = d64.valueHeads = heads;
      ScheduleOptions small =
          defaultSchedule(d64, sequences, h200, 8192, "sm_90");
      EXPECT_TRUE(small.warpgroup) << heads << " heads";
      EXPECT_EQ(small.tileV, 64) << heads << " heads";
      EXPECT_TRUE(planChunkKernel(d64, small).ok()) << heads << " heads";
    }
    EXPECT_FALSE(defaultSchedule(spec, 1, h200, 8192, "sm_80").warpgroup);
  }
  // KDA's printed pair at d64 was not timed against the split kernels.
  EXPECT_FALSE(
      defaultSchedule(preset("kda", 96, 64), 1, h200, 8192, "sm_90").warpgroup);
}

} // namespace
