//===- BackwardKernelTest.cpp - The backward's generated kernels --------===//
//
// Part of lina. planBackwardKernel prints lina-chunk-backward's program as
// the backward's kernels for every preset: they compile (NVRTC needs no
// GPU), walk the chunks from the last, add the key-side gradients
// atomically, read transposed states in place, keep what shared memory
// cannot hold in global memory, and refuse layouts that cannot be built.
// The GPU runs them against the float64 backward (lina run --backward
// --device gpu, scripts/gpu-check.sh).
//
//===----------------------------------------------------------------------===//
#include "ExpectCubin.h"

#include "lina/Codegen/CudaEmitter.h"
#include "lina/Codegen/KernelPlanner.h"
#include "lina/Dialect/Lina/IR/Lina.h"
#include "lina/Runtime/PtxasReport.h"
#include "lina/Spec/Presets.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <regex>

using namespace lina;

namespace {

Spec presetSpec(const std::string &name, DType dtype = DType::BF16) {
  Spec spec = findPreset(name)->spec;
  spec.dtype = dtype;
  return spec;
}

/// The text of the kernel or device function `name`, to the end of its
/// body (its definition comes before any call of it).
std::string kernelText(const BackwardPlan &plan, const std::string &name) {
  size_t at = plan.source.find(" " + name + "(");
  EXPECT_NE(at, std::string::npos) << name;
  if (at == std::string::npos)
    return "";
  size_t end = plan.source.find("\n}\n", at);
  return plan.source.substr(at, end == std::string::npos ? end : end - at);
}

/// The prepare kernels' texts, one after another.
std::string preparesText(const BackwardPlan &plan) {
  std::string text;
  for (const BackwardPlan::Prepare &prepare : plan.prepares)
    text += kernelText(plan, prepare.kernel);
  return text;
}

/// The chunk-parallel kernel that adds up the gradients.
std::string backwardKernelText(const BackwardPlan &plan) {
  return kernelText(plan, plan.backwardKernel);
}

class EveryBackwardCompiles : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryBackwardCompiles, ToACubin) {
  if (!cuda::Nvrtc::get().available())
    GTEST_SKIP() << cuda::Nvrtc::get().status().message();
  Spec spec = presetSpec(GetParam());
  spec.varlen = true; // the varlen path is a superset of the batched one
  Expected<BackwardPlan> plan = planBackwardKernel(spec, {});
  ASSERT_TRUE(plan.ok()) << plan.message();
  // The state's gradient from the last chunk to the first, written before
  // each chunk; no input's gradient is added up there.
  std::string scan = kernelText(*plan, plan->stateGradsKernel);
  EXPECT_NE(scan.find("for (i64 chunk = chunks - 1; chunk >= 0; --chunk)"),
            std::string::npos);
  // bf16 specs keep the chunk states and their gradients in bf16, stored
  // from the accumulators that hold the gradient (lina-place-state).
  EXPECT_NE(scan.find("S.store((bf16 *)d.chunk_grads + "), std::string::npos)
      << scan;
  EXPECT_NE(scan.find("if (d.dh0)"), std::string::npos);
  EXPECT_EQ(scan.find("accumulate_"), std::string::npos);
  // It never reads the state, so it runs beside the forward's scan that
  // writes the states, in one grid: its CTAs first, then the forward's.
  EXPECT_EQ(scan.find("p.chunk_states"), std::string::npos);
  // Where the chunk solves (the delta and DPLR rules), the scans load what
  // chunk-parallel prepare kernels solved, one record a chunk: no solve on
  // their serial path. The additive rules' scans stay whole.
  bool solves = spec.update != UpdateRule::Additive;
  bool statesCut = solves;
  std::string states = kernelText(*plan, plan->statesKernel);
  EXPECT_EQ(plan->prepares.size(), (solves ? 1u : 0u) + (statesCut ? 1u : 0u));
  EXPECT_EQ(plan->recordFloats > 0, solves);
  for (auto [walk, cut] :
       {std::pair{scan, solves}, std::pair{states, statesCut}}) {
    EXPECT_EQ(walk.find("tri_solve") == std::string::npos, cut || !solves)
        << walk;
    EXPECT_EQ(walk.find("p.chunk_data + (slot * ") != std::string::npos, cut)
        << walk;
  }
  // (A value both scans load is solved once, by the first prepare kernel.)
  EXPECT_EQ(llvm::any_of(
                plan->prepares,
                [&](const BackwardPlan::Prepare &prepare) {
                  return kernelText(*plan, prepare.kernel).find("tri_solve") !=
                         std::string::npos;
                }),
            solves);
  std::string scans = kernelText(*plan, plan->scansKernel);
  size_t grads = scans.find(plan->stateGradsKernel + "(p, d, blockIdx.x);");
  size_t forward = scans.find(plan->statesKernel + "(p, blockIdx.x - ctas);");
  EXPECT_NE(grads, std::string::npos) << scans;
  EXPECT_NE(forward, std::string::npos) << scans;
  EXPECT_LT(grads, forward) << scans;
  // Then a CTA a chunk, from the chunk's stored state and gradient.
  std::string kernel = backwardKernelText(*plan);
  EXPECT_NE(kernel.find("for (i64 chunk = blockIdx.y; chunk < chunks; "
                        "chunk += gridDim.y)"),
            std::string::npos);
  EXPECT_NE(kernel.find("(bf16 *)p.chunk_states + "), std::string::npos);
  EXPECT_NE(kernel.find("(bf16 *)d.chunk_grads + "), std::string::npos);
  // q and k gradients are sums over value tiles (and grouped heads).
  std::string rows = "accumulate_rows<" + std::to_string(plan->chunkSize) +
                     ", " + std::to_string(spec.keyDim) + ">";
  EXPECT_NE(kernel.find(rows + "(d.dq"), std::string::npos) << rows;
  EXPECT_NE(kernel.find(rows + "(d.dk"), std::string::npos) << rows;
  EXPECT_EQ(kernel.find("d.dh0"), std::string::npos);
  // It compiles, and no kernel keeps an array in local memory (a stack
  // frame beyond the registers ptxas spills): the device library indexes
  // its arrays of tiles at constants only. A sum once indexed its tiles at
  // a computed index and made gdn's backward 3 % slower.
  cuda::CompileOptions options;
  options.arch = "sm_90";
  options.flags.push_back(cuda::kPtxasVerbose);
  Expected<cuda::CompiledKernel> compiled =
      cuda::Nvrtc::get().compile(plan->source, options);
  ASSERT_TRUE(compiled.ok()) << compiled.message();
  std::vector<cuda::KernelResources> kernels =
      cuda::parsePtxasReport(compiled->log);
  EXPECT_FALSE(kernels.empty()) << compiled->log;
  // (ptxas rounds a frame of spills up to 8 or 16 bytes.)
  for (const cuda::KernelResources &k : kernels)
    EXPECT_LT(k.stackBytes - k.spillStoreBytes, 16) << k.kernel << "\n"
                                                    << compiled->log;
}

INSTANTIATE_TEST_SUITE_P(AllPresets, EveryBackwardCompiles,
                         ::testing::ValuesIn(presetNames()));

TEST(BackwardKernel, SixteenAndThirtyTwoBitDtypesCompile) {
  if (!cuda::Nvrtc::get().available())
    GTEST_SKIP() << cuda::Nvrtc::get().status().message();
  for (auto [name, dtype] :
       {std::pair{"gdn", DType::F16}, std::pair{"kda", DType::F32}}) {
    Expected<BackwardPlan> plan =
        planBackwardKernel(presetSpec(name, dtype), {});
    ASSERT_TRUE(plan.ok()) << plan.message();
    // f16 specs multiply in f16; f32 ones on the fp32 units.
    EXPECT_EQ(plan->source.find("#define LINA_MMA_F16") != std::string::npos,
              dtype == DType::F16);
    std::string kernel = backwardKernelText(*plan);
    EXPECT_EQ(std::regex_search(kernel, std::regex("product<[^>]*, true>\\(")),
              dtype != DType::F32)
        << name;
    // Their chunk states stay fp32 (bf16 specs keep them in bf16).
    EXPECT_EQ(plan->source.find("(bf16 *)p.chunk_states"), std::string::npos);
    EXPECT_NE(kernel.find("p.chunk_states + "), std::string::npos);
    EXPECT_EQ(plan->chunkStateBytes(), 4);
    ASSERT_NO_FATAL_FAILURE(test::expectCubinForSm90(plan->source));
  }
}

/// The layout the tests below name in their expectations: 16-token chunks
/// of 32 value columns on eight warps.
constexpr BackwardScheduleOptions kNarrow{16, 32, 8};

TEST(BackwardKernel, GradientsKernelLoadsWhatTheRecordHolds) {
  // gdn's default layout: W and the inclusive decay product from the
  // reverse scan's share of the record, U from the states scan's; the
  // kernel makes neither solve nor that product.
  Expected<BackwardPlan> gdn = planBackwardKernel(presetSpec("gdn"), {});
  ASSERT_TRUE(gdn.ok()) << gdn.message();
  std::string kernel = backwardKernelText(*gdn);
  EXPECT_EQ(kernel.find("tri_solve<"), std::string::npos);
  EXPECT_FALSE(std::regex_search(
      kernel, std::regex("decay_product<[^>]*>\\([^;]*, n, false\\)")));
  EXPECT_TRUE(std::regex_search(
      kernel, std::regex("fetch(<true>)?\\([^;]*p\\.chunk_data")));
  // kda's too, and its per-channel inclusive product: both its scans are
  // cut, so the record holds U as well.
  Expected<BackwardPlan> kda = planBackwardKernel(presetSpec("kda"), {});
  ASSERT_TRUE(kda.ok()) << kda.message();
  kernel = backwardKernelText(*kda);
  EXPECT_EQ(kernel.find("tri_solve<"), std::string::npos);
  EXPECT_FALSE(std::regex_search(
      kernel, std::regex("decay_product<[^>]*>\\([^;]*, n, false\\)")));
  // f32 specs too, their record all fp32.
  Expected<BackwardPlan> f32 =
      planBackwardKernel(presetSpec("gdn", DType::F32), {});
  ASSERT_TRUE(f32.ok()) << f32.message();
  EXPECT_EQ(backwardKernelText(*f32).find("tri_solve<"), std::string::npos);
}

TEST(BackwardKernel, SolvedValuesAreRecordedInTheInputsDtype) {
  // The solved values U, which the states scan reads elementwise (U - W S),
  // are held in bf16 like the record's product operands: no fp32 tile of a
  // chunk's rows is stored, and the gradients kernel loads U converted, as
  // the scan did, rather than solving again (R x R tiles stay fp32). f32
  // specs keep fp32.
  for (const char *name : {"gdn", "kda", "rwkv7"}) {
    Expected<BackwardPlan> plan = planBackwardKernel(presetSpec(name), {});
    ASSERT_TRUE(plan.ok()) << plan.message();
    std::string prepares = preparesText(*plan);
    EXPECT_NE(prepares.find("tri_solve_to_global<"), std::string::npos)
        << name;
    EXPECT_FALSE(std::regex_search(
        prepares, std::regex(R"((tri_solve_to_global<[^>]*>|store_tile<\d+, )"
                             R"(128, float>)\(\(float \*\)\(p\.chunk_data)")))
        << name << "\n" << prepares;
    std::string kernel = backwardKernelText(*plan);
    EXPECT_EQ(kernel.find("tri_solve<"), std::string::npos) << name;
    EXPECT_TRUE(std::regex_search(
        kernel, std::regex(R"(fetch<true>\(\(bf16 \*\)\(p\.chunk_data)")))
        << name;
  }
  Expected<BackwardPlan> f32 =
      planBackwardKernel(presetSpec("kda", DType::F32), {});
  ASSERT_TRUE(f32.ok()) << f32.message();
  EXPECT_TRUE(std::regex_search(
      preparesText(*f32), std::regex(R"(tri_solve_to_global<[^>]*>\(\(float \*\))")));
}

TEST(BackwardKernel, StateTransposesAreReadInPlace) {
  Expected<BackwardPlan> plan = planBackwardKernel(presetSpec("gdn"), kNarrow);
  ASSERT_TRUE(plan.ok()) << plan.message();
  std::string kernel = backwardKernelText(*plan);
  // dO S^T and X dS^T read the K x tile-v states transposed: no
  // transposed copy of a state is made.
  EXPECT_EQ(kernel.find("transpose<128, 32>"), std::string::npos);
  EXPECT_NE(kernel.find("product<16, 128, 32, false, true, true>"),
            std::string::npos);
}

TEST(BackwardKernel, TilesPastSharedMemoryGoToGlobalMemory) {
  // At 16-token chunks of 32 columns gdn's and kda's chunks fit on chip
  // (kda's since its gate gradient's products are terms of one sum);
  // RWKV-7's two low-rank factors keep more key-side tiles alive than a
  // CTA's shared memory holds at d128 on its default layout (16-token
  // chunks of 64 columns).
  for (const char *fits : {"gdn", "kda"}) {
    Expected<BackwardPlan> plan = planBackwardKernel(presetSpec(fits), kNarrow);
    ASSERT_TRUE(plan.ok()) << plan.message();
    EXPECT_EQ(plan->spillFloats, 0) << fits;
    EXPECT_EQ(backwardKernelText(*plan).find("spill"), std::string::npos)
        << fits;
  }
  Expected<BackwardPlan> rwkv7 = planBackwardKernel(presetSpec("rwkv7"), {});
  ASSERT_TRUE(rwkv7.ok()) << rwkv7.message();
  EXPECT_GT(rwkv7->spillFloats, 0);
  EXPECT_LE(rwkv7->backwardSharedBytes, 232448u);
  std::string kernel = backwardKernelText(*rwkv7);
  // A region a CTA of the grid the launcher bounds (chunkRows).
  EXPECT_NE(kernel.find("float *spill = d.spill + ((i64)blockIdx.y * "
                        "gridDim.x + blockIdx.x) * "),
            std::string::npos);
  EXPECT_NE(kernel.find("(spill + "), std::string::npos);
}

TEST(BackwardKernel, ChunkTopLoadsAreInFlightTogether) {
  // kda's default layout: the chunk states and the tiles that keep their
  // global element type (the gates, beta, the record's packed ones) go by
  // cp.async, the converted tiles (q, k, v, the record's U) through
  // registers, every load issued before the first lands, then one wait and
  // the barrier before the first op reads them.
  // Each load had been a round trip of its own.
  Expected<BackwardPlan> plan = planBackwardKernel(presetSpec("kda"), {});
  ASSERT_TRUE(plan.ok()) << plan.message();
  std::string kernel = backwardKernelText(*plan);
  EXPECT_EQ(kernel.find("load_tile<"), std::string::npos) << kernel;
  size_t top = kernel.find("for (i64 chunk");
  ASSERT_NE(top, std::string::npos) << kernel;
  size_t barrier = kernel.find("__syncthreads();", top);
  ASSERT_NE(barrier, std::string::npos) << kernel;
  std::string loads = kernel.substr(top, barrier - top);
  auto count = [&](const std::string &what) {
    int n = 0;
    for (size_t at = loads.find(what); at != std::string::npos;
         at = loads.find(what, at + 1))
      ++n;
    return n;
  };
  EXPECT_EQ(count("load_state<128, 128, false>("), 2) << loads;
  EXPECT_EQ(count("tile_copy<16, 128, float>::fetch("), 1) << loads; // g
  EXPECT_EQ(count("tile_copy<16, 1, float>::fetch("), 1) << loads;   // beta
  EXPECT_EQ(count("::fetch<true>("), 2) << loads; // two of the record's tiles
  EXPECT_EQ(count(".fetch<true>("), 1) << loads;  // and U, converted
  EXPECT_EQ(count(".commit("), 4) << loads;
  size_t lastFetch = std::max(loads.rfind(".fetch"), loads.rfind("::fetch"));
  size_t firstCommit = loads.find(".commit(");
  EXPECT_LT(lastFetch, firstCommit) << loads;
  size_t wait = loads.find("copies_landed<0>();");
  ASSERT_NE(wait, std::string::npos) << loads;
  EXPECT_GT(wait, loads.rfind(".commit(")) << loads;
  // The prepare kernels load their chunk so too: q and k through
  // registers, the gates and beta by cp.async.
  std::string prepare = kernelText(*plan, "lina_backward_grads_prepare");
  EXPECT_EQ(prepare.find("load_tile<"), std::string::npos) << prepare;
  size_t prepareBarrier = prepare.find("__syncthreads();");
  ASSERT_NE(prepareBarrier, std::string::npos) << prepare;
  std::string prepareLoads = prepare.substr(0, prepareBarrier);
  EXPECT_NE(prepareLoads.find("tile_copy<16, 128, float>::fetch("),
            std::string::npos)
      << prepareLoads;
  size_t prepareCommit = prepareLoads.find(".commit(");
  ASSERT_NE(prepareCommit, std::string::npos) << prepareLoads;
  EXPECT_LT(prepareLoads.rfind(".fetch("), prepareCommit) << prepareLoads;
  EXPECT_NE(prepareLoads.find("copies_landed<0>();"), std::string::npos)
      << prepareLoads;
}

TEST(BackwardKernel, NoCopyWritesTheSpillRegion) {
  // gdn at 32-token chunks of 64 columns keeps a tile it could copy in its
  // element type past shared memory: cp.async writes shared memory only,
  // so that tile goes through registers like the converted ones.
  Expected<BackwardPlan> plan =
      planBackwardKernel(presetSpec("gdn"), BackwardScheduleOptions{32, 64, 8});
  ASSERT_TRUE(plan.ok()) << plan.message();
  ASSERT_GT(plan->spillFloats, 0);
  std::string kernel = backwardKernelText(*plan);
  EXPECT_NE(kernel.find("tile_copy<"), std::string::npos) << kernel;
  EXPECT_NE(kernel.find(".commit((spill + "), std::string::npos) << kernel;
  std::regex copyToSpill(R"(tile_copy<[^\n]*\(spill)");
  EXPECT_FALSE(std::regex_search(kernel, copyToSpill)) << kernel;
}

TEST(BackwardKernel, TheLeastTouchedTilesGoToGlobalMemory) {
  // gdn's default layout (32-token chunks of 64 columns) keeps about 140 KB
  // of its chunk in global memory. Each call on a tile there waits on L2,
  // so the tiles that go are those the fewest calls touch: fewer than a
  // quarter of the chunk's calls touch one (the first layout that spilled
  // whatever lay past shared memory had 34 of 78).
  Expected<BackwardPlan> plan = planBackwardKernel(presetSpec("gdn"), {});
  ASSERT_TRUE(plan.ok()) << plan.message();
  ASSERT_GT(plan->spillFloats, 0);
  std::string kernel = backwardKernelText(*plan);
  std::regex call(R"(\n    [a-z_]+<[^\n]*)");
  int calls = 0, global = 0;
  for (auto it = std::sregex_iterator(kernel.begin(), kernel.end(), call);
       it != std::sregex_iterator(); ++it) {
    ++calls;
    global += it->str().find("(spill + ") != std::string::npos;
  }
  EXPECT_GT(calls, 40) << kernel;
  EXPECT_GT(global, 0) << kernel;
  EXPECT_LT(4 * global, calls) << global << " of " << calls << " calls\n"
                               << kernel;
  // The decay products' scratch stays in shared memory.
  EXPECT_EQ(kernel.find("n, true, (spill + "), std::string::npos) << kernel;
}

TEST(BackwardKernel, SumsAreOneCallEach) {
  // lina-fuse-sums runs with the backward's derivation: a gate's and a
  // beta's gradients are row dots, not a product's tile then its row sum,
  // and each sum of contributions is one call, the state's gradient too.
  // The one elementwise product left per decay product is dP . P, which
  // lina.straddle_sum reads.
  Expected<BackwardPlan> plan = planBackwardKernel(presetSpec("gdn"), kNarrow);
  ASSERT_TRUE(plan.ok()) << plan.message();
  std::string kernel = backwardKernelText(*plan);
  auto count = [&](const char *call) {
    size_t n = 0;
    for (size_t at = kernel.find(call); at != std::string::npos;
         at = kernel.find(call, at + 1))
      ++n;
    return n;
  };
  EXPECT_EQ(count(" mul<"), 2u) << kernel;
  EXPECT_EQ(count(" straddle_sum<16>("), 2u) << kernel;
  EXPECT_EQ(kernel.find(" row_sum<"), std::string::npos);
  EXPECT_NE(kernel.find("row_dot<16, 128>("), std::string::npos);
  // dg: one call sums the exclusive cumulative sum (the keys decayed to
  // the chunk's end), the two decay products' straddle sums and the
  // reverse cumulative sum of the rest, and dg is accumulated from it.
  std::regex dg(
      R"(sum<16, 4>\(\(smem \+ (\d+)\)(, \(smem \+ \d+\)){4}\);)"
      R"(\n(    __syncthreads\(\);\n)?    accumulate_rows<16, 1>\(d\.dg)"
      R"( \+ [^;]*, \(smem \+ \1\), n\);)");
  EXPECT_TRUE(std::regex_search(kernel, dg)) << kernel;
  std::string scan = kernelText(*plan, plan->stateGradsKernel);
  // dS before the chunk is that sum's, made in the accumulators that hold
  // the gradient: its two products added into them, no tile summed or
  // copied.
  EXPECT_EQ(scan.find(" sum<"), std::string::npos) << scan;
  EXPECT_EQ(scan.find("copy_tile<"), std::string::npos) << scan;
  size_t updates = 0;
  for (size_t at = scan.find("S.update<16, 1>("); at != std::string::npos;
       at = scan.find("S.update<16, 1>(", at + 1))
    ++updates;
  EXPECT_EQ(updates, 2u) << scan;
}

TEST(BackwardKernel, ProductsOnlySummedAreTermsOfTheSum) {
  // kda's dG sums seven terms, five of them products nothing else reads
  // (lina-fuse-sums): the sum multiplies them as it reads them, each
  // product's second factor marked in its call's mask, and no tile holds
  // them. The one product left (the keys decayed to the chunk's end) is
  // read by an exclusive cumulative sum.
  Expected<BackwardPlan> plan = planBackwardKernel(presetSpec("kda"), {});
  ASSERT_TRUE(plan.ok()) << plan.message();
  std::string kernel = backwardKernelText(*plan);
  std::regex dg(
      R"(sum<\d+, 5, 0x1552ull>\((\((smem|spill) \+ \d+\)(, )?){14}\);)");
  EXPECT_TRUE(std::regex_search(kernel, dg)) << kernel;
  size_t muls = 0;
  for (size_t at = kernel.find(" mul<"); at != std::string::npos;
       at = kernel.find(" mul<", at + 1))
    ++muls;
  EXPECT_EQ(muls, 1u) << kernel;
}

TEST(BackwardKernel, AProductPastTheSixtyFourthTileIsRefused) {
  // The device function marks a sum's product factors in 64 bits;
  // lina-fuse-sums never puts a factor past the 64th tile, and a
  // hand-written program that does is refused with the way out, not
  // miscompiled.
  std::string terms;
  for (int i = 0; i < 64; ++i)
    terms += "%4, ";
  terms += "%4 * %4";
  std::string text = R"(
  lina.chunked @la <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16> chunk_size(16) schedule <tile_v = 16, warps = 4, strategy = materialize> {
  ^bb0(%s: !lina.tile<16x16>):
    %0 = lina.load q : <16x16>
    %1 = lina.load k : <16x16>
    %2 = lina.load v : <16x16>
    %3 = lina.matmul %0, %s : <16x16>, <16x16> -> <16x16>
    lina.store o, %3 : <16x16>
    %4 = lina.matmul %1, %2 {transpose_lhs} : <16x16>, <16x16> -> <16x16>
    %5 = lina.add %s, %4 : <16x16>
    lina.yield %5 : <16x16>
  }
  lina.chunked_backward @la_backward <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16> chunk_size(16) schedule <tile_v = 16, warps = 4> {
  ^bb0(%s: !lina.tile<16x16>, %ds: !lina.tile<16x16>):
    %0 = lina.load q : <16x16>
    %1 = lina.load k : <16x16>
    %2 = lina.load v : <16x16>
    %3 = lina.load_output_grad : <16x16>
    %4 = lina.add %0, %3 : <16x16>
    %5 = lina.sum )" +
                     terms + R"( : <16x16>
    lina.accumulate q, %5 : <16x16>
    lina.yield %ds : <16x16>
  }
)";
  mlir::MLIRContext ctx;
  ctx.loadDialect<LinaDialect>();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  ASSERT_TRUE(module);
  Expected<BackwardPlan> plan = emitCudaBackward(*module);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.message().find("past its 64th tile"), std::string::npos)
      << plan.message();
}

TEST(BackwardKernel, ChunkStatesStayBf16WhereProductsAndRowDotsReadThem) {
  // A bf16 spec's chunk states are bf16 in the workspace; the gradients
  // kernel keeps them so in shared memory (half the floats of an fp32
  // tile) where only tensor-core products and row dots read them. An f16
  // spec's are fp32 in the workspace and stay fp32 tiles.
  for (const char *name : {"gdn", "kda", "gla", "mamba2", "rwkv7"}) {
    Expected<BackwardPlan> plan = planBackwardKernel(presetSpec(name), {});
    ASSERT_TRUE(plan.ok()) << plan.message();
    std::string kernel = backwardKernelText(*plan);
    std::regex packed(
        R"(load_state<128, \d+, false>\(\(\(bf16 \*\)\(smem \+ \d+\)\), \(bf16 \*\)(p\.chunk_states|d\.chunk_grads))");
    auto begin = std::sregex_iterator(kernel.begin(), kernel.end(), packed);
    EXPECT_EQ(std::distance(begin, std::sregex_iterator()), 2) << name;
    EXPECT_NE(kernel.find("row_dot<128, "), std::string::npos) << name;
  }
  Expected<BackwardPlan> f16 =
      planBackwardKernel(presetSpec("gdn", DType::F16), {});
  ASSERT_TRUE(f16.ok()) << f16.message();
  std::string kernel = backwardKernelText(*f16);
  EXPECT_NE(kernel.find("load_state<128, 64>((smem + "), std::string::npos)
      << kernel;
  EXPECT_EQ(kernel.find("(bf16 *)(smem"), std::string::npos) << kernel;
}

TEST(BackwardKernel, LoadsOnlyProductsReadStayPacked) {
  // gdn's gradients kernel reads dL/do and the record's W only as
  // tensor-core operands: it keeps both as loaded, 16-bit, in shared memory
  // (half the floats, ldmatrix instead of converting fp32 pairs), and
  // fewer of its tiles go to global memory for it.
  Expected<BackwardPlan> gdn = planBackwardKernel(presetSpec("gdn"), {});
  ASSERT_TRUE(gdn.ok()) << gdn.message();
  std::string kernel = backwardKernelText(*gdn);
  for (const char *source :
       {R"(\(const bf16 \*\)d\.d_o)", R"(\(bf16 \*\)\(p\.chunk_data)"})
    EXPECT_TRUE(std::regex_search(
        kernel,
        std::regex(
            std::string(
                R"(tile_copy<32, 128, bf16>::fetch(<true>)?\(\(\(bf16 \*\)\(smem \+ \d+\)\), )") +
            source)))
        << source << "\n"
        << kernel;
  // q and k are normalised elementwise first: fp32 tiles, converted as
  // they land.
  std::smatch q;
  ASSERT_TRUE(std::regex_search(
      kernel, q,
      std::regex(
          R"(tile_fetch<32, 128, bf16> (\w+);\n *\w+\.fetch\(\(const bf16 \*\)p\.q)")))
      << kernel;
  EXPECT_TRUE(std::regex_search(
      kernel,
      std::regex(q[1].str() + R"(\.commit\(\((smem|spill) \+ \d+\)\))")))
      << kernel;
  // Where packing them would put more tiles in global memory (the
  // first-fit layout is not monotone), they stay fp32: rwkv7 packs its
  // three at 16-token chunks, none at 32 on whole heads, whose packed
  // layout would keep more floats in global memory than the fp32 one.
  BackwardScheduleOptions c32;
  c32.chunkSize = 32;
  c32.tileV = 128;
  c32.warps = 8;
  std::regex packedLoad(R"(<\d+, \d+, bf16>::fetch(<true>)?\(\(\(bf16)");
  Expected<BackwardPlan> rwkv7 = planBackwardKernel(presetSpec("rwkv7"), {});
  ASSERT_TRUE(rwkv7.ok()) << rwkv7.message();
  EXPECT_TRUE(std::regex_search(backwardKernelText(*rwkv7), packedLoad));
  rwkv7 = planBackwardKernel(presetSpec("rwkv7"), c32);
  ASSERT_TRUE(rwkv7.ok()) << rwkv7.message();
  EXPECT_FALSE(std::regex_search(backwardKernelText(*rwkv7), packedLoad));
  // An f16 spec's loads are packed in f16.
  Expected<BackwardPlan> f16 =
      planBackwardKernel(presetSpec("gdn", DType::F16), {});
  ASSERT_TRUE(f16.ok()) << f16.message();
  EXPECT_TRUE(std::regex_search(
      backwardKernelText(*f16),
      std::regex(
          R"(tile_copy<\d+, \d+, f16>::fetch(<true>)?\(\(\(f16 \*\)\(smem \+ \d+\)\), \(const f16 \*\)d\.d_o)")));
}

TEST(BackwardKernel, UnsetKnobsTakeTheChosenLayout) {
  // lina-choose-schedule's backward layouts (ChooseSchedule.cpp), for the
  // spec lina-specialize makes: KDA written in the DPLR form gets KDA's.
  Spec kdaAsDplr = presetSpec("rwkv7");
  kdaAsDplr.beta = BetaSource::Given;
  kdaAsDplr.qkL2Norm = true;
  kdaAsDplr.lowRankA = LowRankSource::NegDecayedKey;
  kdaAsDplr.lowRankB = LowRankSource::BetaKey;
  kdaAsDplr.write = WriteWeight::Beta;
  auto d64 = [](Spec spec) {
    spec.keyDim = spec.valueDim = 64;
    return spec;
  };
  struct Case {
    const char *name;
    Spec spec;
    int64_t chunkSize, tileV, threads;
  };
  for (const Case &c :
       {Case{"gdn", presetSpec("gdn"), 32, 128, 256},
        Case{"gdn f16", presetSpec("gdn", DType::F16), 32, 64, 256},
        Case{"kda", presetSpec("kda"), 16, 128, 512},
        Case{"gla", presetSpec("gla"), 32, 128, 512},
        Case{"rwkv7", presetSpec("rwkv7"), 16, 64, 512},
        Case{"kda as dplr", kdaAsDplr, 16, 128, 512},
        Case{"gdn d64", d64(presetSpec("gdn")), 32, 64, 256},
        Case{"kda d64", d64(presetSpec("kda")), 16, 64, 512},
        Case{"gla d64", d64(presetSpec("gla")), 16, 64, 512}}) {
    Expected<BackwardPlan> plan = planBackwardKernel(c.spec, {});
    ASSERT_TRUE(plan.ok()) << c.name << ": " << plan.message();
    EXPECT_EQ(plan->chunkSize, c.chunkSize) << c.name;
    EXPECT_EQ(plan->tileV, c.tileV) << c.name;
    EXPECT_EQ(plan->threads, c.threads) << c.name;
    EXPECT_LE(plan->backwardSharedBytes, 232448u) << c.name;
  }
  // A knob the caller sets wins over the chosen one; the others stay.
  BackwardScheduleOptions warps;
  warps.warps = 4;
  Expected<BackwardPlan> plan = planBackwardKernel(presetSpec("gdn"), warps);
  ASSERT_TRUE(plan.ok()) << plan.message();
  EXPECT_EQ(plan->threads, 128);
  EXPECT_EQ(plan->chunkSize, 32);
  EXPECT_EQ(plan->tileV, 128);
}

TEST(BackwardKernel, BadLayoutsAreRefused) {
  BackwardScheduleOptions options;
  options.tileV = 48; // does not divide 128
  Expected<BackwardPlan> plan = planBackwardKernel(presetSpec("gdn"), options);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.message(), "lina-schedule: tile-v (48) must be a multiple "
                            "of 8 dividing value_dim (128)");
  options = {};
  options.chunkSize = 8;
  plan = planBackwardKernel(presetSpec("gdn"), options);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.message().find("chunk-size must be 16, 32, 64 or 128, got 8"),
            std::string::npos)
      << plan.message();
  EXPECT_NE(plan.message().back(), '\n');
}

} // namespace
