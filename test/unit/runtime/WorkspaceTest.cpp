//===- WorkspaceTest.cpp - Workspace sizes and lent workspaces, no GPU ----===//
//
// Part of lina. The bytes a call's workspace needs and where its parts lie
// are pure functions of the plan and the shape (WorkspaceLayout.h), and a
// lent workspace is checked before anything launches (Workspace.h): both
// are tested here with hand-made plans and made-up addresses, which are
// compared, never dereferenced.
//
//===----------------------------------------------------------------------===//
#include "lina/Runtime/Workspace.h"
#include "lina/Runtime/WorkspaceLayout.h"
#include "lina/Spec/Presets.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <cstdint>
#include <vector>

using namespace lina;
using ::testing::HasSubstr;

namespace {

/// HV = 8, K = 16, V = 32, chunk 16, one value tile.
Spec smallSpec(const char *preset, bool varlen = false) {
  Spec s = findPreset(preset)->spec;
  s.keyDim = 16;
  s.valueDim = 32;
  s.heads = 4;
  s.valueHeads = 8;
  s.dtype = DType::BF16;
  s.varlen = varlen;
  return s;
}

KernelPlan planFor(Strategy strategy, bool varlen = false) {
  KernelPlan plan;
  plan.spec = smallSpec("mamba2", varlen);
  plan.strategy = strategy;
  plan.chunkSize = 16;
  plan.tileV = 32;
  return plan;
}

CallShape shape(int64_t batch, int64_t seqLen, int64_t numSequences = 0) {
  return {batch, seqLen, numSequences};
}

ForwardWorkspaceLayout layoutOf(const KernelPlan &plan, CallShape call,
                                int64_t smCount = 132) {
  Expected<ForwardWorkspaceLayout> layout =
      forwardWorkspaceLayout(plan, call, smCount);
  EXPECT_TRUE(layout.ok()) << layout.status().message();
  return layout.ok() ? *layout : ForwardWorkspaceLayout{};
}

void *address(uint64_t a) { return reinterpret_cast<void *>(a); }

TEST(WorkspaceLayout, TheFusedScanNeedsNone) {
  KernelPlan plan = planFor(Strategy::FusedScan);
  EXPECT_EQ(layoutOf(plan, shape(2, 4096)).bytes, 0u);
  EXPECT_EQ(layoutOf(plan, shape(1, 0)).bytes, 0u);
}

// Materialize: a state (K x V fp32) per (chunk slot, value head); a chunk
// slot per whole chunk of the call's tokens, plus one per sequence and one.
TEST(WorkspaceLayout, MaterializeHoldsAStatePerChunkSlot) {
  KernelPlan plan = planFor(Strategy::Materialize);
  // 3 x 33 tokens: 99 / 16 = 6 chunks, + 3 sequences + 1 = 10 slots.
  ForwardWorkspaceLayout layout = layoutOf(plan, shape(3, 33));
  EXPECT_EQ(layout.recordBytes, 10u * 8 * 16 * 32 * 4);
  EXPECT_EQ(layout.segmentBytes, 0u);
  EXPECT_EQ(layout.bytes, layout.recordBytes);
  // A longer call needs more; the same shape always the same.
  EXPECT_GT(layoutOf(plan, shape(3, 65)).bytes, layout.bytes);
  EXPECT_EQ(layoutOf(plan, shape(3, 33)).bytes, layout.bytes);
}

TEST(WorkspaceLayout, SplitRecordsAreRoundedTo256Bytes) {
  KernelPlan plan = planFor(Strategy::Split);
  plan.chunkDataFloats = 3;
  // 10 slots x 8 heads x 3 floats x 4 bytes = 960, rounded up to 1024.
  EXPECT_EQ(layoutOf(plan, shape(3, 33)).bytes, 1024u);
  // A split plan that stores nothing still gets valid memory for its
  // record pointer.
  plan.chunkDataFloats = 0;
  EXPECT_EQ(layoutOf(plan, shape(3, 33)).bytes, 256u);
}

// With segments the records are followed by each piece's final state
// (fp32), its starting state (bf16) and its runs' decays.
TEST(WorkspaceLayout, SegmentsFollowTheRecords) {
  KernelPlan plan = planFor(Strategy::Split);
  plan.chunkDataFloats = 10;
  plan.segments = 4;
  plan.segmentGateColumns = 1;
  ForwardWorkspaceLayout layout = layoutOf(plan, shape(1, 256));
  // 256 tokens in 4 pieces of 64 (4 chunks each, one carry run).
  EXPECT_EQ(layout.pieces.count, 4);
  EXPECT_EQ(layout.pieces.length, 64);
  EXPECT_EQ(layout.runs, 1);
  // 256 / 16 + 4 pieces + 1 = 21 slots x 8 x 10 x 4 = 6720 -> 6912.
  EXPECT_EQ(layout.recordBytes, 6912u);
  const size_t states = 4u * 8 * 16 * 32 * 4;
  EXPECT_EQ(layout.segmentStatesBytes, states);
  EXPECT_EQ(layout.segmentBytes, states + states / 2 + 4u * 8 * 1 * 1 * 4);
  EXPECT_EQ(layout.bytes, layout.recordBytes + layout.segmentBytes);
  EXPECT_EQ(layout.recordBytes % kWorkspaceAlignment, 0u);
}

// Packed sequences take pieces only where their heads leave SMs idle: the
// size depends on the GPU, which is why the query is the kernel's.
TEST(WorkspaceLayout, PackedSegmentsDependOnTheGpu) {
  KernelPlan plan = planFor(Strategy::Split, /*varlen=*/true);
  plan.chunkDataFloats = 10;
  plan.segments = 4;
  plan.segmentGateColumns = 1;
  ForwardWorkspaceLayout many = layoutOf(plan, shape(1, 256, 2), 132);
  ForwardWorkspaceLayout few = layoutOf(plan, shape(1, 256, 2), 16);
  EXPECT_EQ(many.pieces.count, 4);
  EXPECT_GT(many.segmentBytes, 0u);
  EXPECT_EQ(few.pieces.count, 1);
  EXPECT_EQ(few.segmentBytes, 0u);
  EXPECT_GT(many.bytes, few.bytes);
}

TEST(WorkspaceLayout, ShapesNoCallCanHaveAreRefused) {
  KernelPlan plan = planFor(Strategy::Materialize);
  struct Case {
    KernelPlan plan;
    CallShape call;
    const char *message;
  };
  KernelPlan packed = planFor(Strategy::Materialize, /*varlen=*/true);
  for (const Case &c :
       {Case{plan, shape(0, 16), "batch must be at least 1 and seqLen at "
                                 "least 0, got 0 and 16"},
        Case{plan, shape(2, -1), "got 2 and -1"},
        Case{packed, shape(2, 16, 2), "varlen packs sequences along T: batch "
                                      "must be 1 and numSequences at least 1, "
                                      "got 2 and 2"},
        Case{packed, shape(1, 16, 0), "got 1 and 0"},
        Case{plan, shape(INT64_MAX / 2, int64_t(1) << 40),
             "the call is too large"}}) {
    Expected<ForwardWorkspaceLayout> layout =
        forwardWorkspaceLayout(c.plan, c.call, 132);
    ASSERT_FALSE(layout.ok()) << c.message;
    EXPECT_EQ(layout.status().code(), StatusCode::InvalidArgument);
    EXPECT_THAT(layout.status().message(), HasSubstr(c.message));
  }
  // A plain call ignores numSequences, as forward() does.
  EXPECT_TRUE(forwardWorkspaceLayout(plan, shape(2, 16, -5), 132).ok());
}

/// gdn's backward on smallSpec's heads: 16-token chunks, two value tiles of
/// 16 columns, 100 floats of spill a CTA.
BackwardPlan smallBackwardPlan() {
  BackwardPlan plan;
  plan.spec = smallSpec("gdn");
  plan.chunkSize = 16;
  plan.tileV = 16;
  plan.spillFloats = 100;
  return plan;
}

// The backward: every chunk's starting state, its state gradient, then
// each CTA's spill.
TEST(WorkspaceLayout, BackwardHoldsStatesGradientsThenSpills) {
  BackwardPlan plan = smallBackwardPlan();
  Expected<BackwardWorkspaceLayout> layout =
      backwardWorkspaceLayout(plan, shape(2, 33));
  ASSERT_TRUE(layout.ok()) << layout.status().message();
  // 66 / 16 = 4 chunks + 2 sequences + 1 = 7 slots, of a bf16 spec's
  // bf16 states.
  EXPECT_EQ(layout->stateBytes, 7u * 8 * 16 * 32 * 2);
  EXPECT_EQ(layout->gradBytes, layout->stateBytes);
  // 2 sequences x 8 heads x 2 tiles CTAs a row, a row each of 3 chunks.
  EXPECT_EQ(layout->ctas, 32);
  EXPECT_EQ(layout->chunkRows, 3);
  EXPECT_EQ(layout->spillBytes, 32u * 3 * 100 * 4);
  EXPECT_EQ(layout->bytes,
            layout->stateBytes + layout->gradBytes + layout->spillBytes);
  Expected<BackwardWorkspaceLayout> bad =
      backwardWorkspaceLayout(plan, shape(0, 33));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("batch must be at least 1"));
  // f16 and f32 specs keep theirs in fp32.
  for (DType dtype : {DType::F16, DType::F32}) {
    plan.spec.dtype = dtype;
    layout = backwardWorkspaceLayout(plan, shape(2, 33));
    ASSERT_TRUE(layout.ok()) << layout.status().message();
    EXPECT_EQ(layout->stateBytes, 7u * 8 * 16 * 32 * 4);
    EXPECT_EQ(layout->gradBytes, layout->stateBytes);
  }
}

// The prepare kernels' records sit between the gradients and the spills,
// one a (chunk slot, value head).
TEST(WorkspaceLayout, BackwardHoldsRecordsBeforeSpills) {
  BackwardPlan plan = smallBackwardPlan();
  plan.recordFloats = 20;
  Expected<BackwardWorkspaceLayout> layout =
      backwardWorkspaceLayout(plan, shape(2, 33));
  ASSERT_TRUE(layout.ok()) << layout.status().message();
  // 7 slots x 8 heads x 20 floats, rounded up to 256 bytes.
  EXPECT_EQ(layout->recordBytes, (7u * 8 * 20 * 4 + 255) / 256 * 256);
  EXPECT_EQ(layout->spillBytes, 32u * 3 * 100 * 4);
  EXPECT_EQ(layout->bytes, layout->stateBytes + layout->gradBytes +
                               layout->recordBytes + layout->spillBytes);
  plan.recordFloats = 0;
  layout = backwardWorkspaceLayout(plan, shape(2, 33));
  ASSERT_TRUE(layout.ok()) << layout.status().message();
  EXPECT_EQ(layout->recordBytes, 0u);
}

// Spilling CTAs walk the chunks: the grid, and so the spill regions, stay
// about BackwardPlan::kSpillingCTAs whatever the length; without spills
// every chunk has its row.
TEST(WorkspaceLayout, BackwardSpillsBoundTheGrid) {
  BackwardPlan plan = smallBackwardPlan();
  Expected<BackwardWorkspaceLayout> layout =
      backwardWorkspaceLayout(plan, shape(2, 1600));
  ASSERT_TRUE(layout.ok()) << layout.status().message();
  EXPECT_EQ(layout->chunkRows, (BackwardPlan::kSpillingCTAs + 31) / 32);
  EXPECT_EQ(layout->spillBytes, 32u * layout->chunkRows * 100 * 4);
  plan.spillFloats = 0;
  layout = backwardWorkspaceLayout(plan, shape(2, 1600));
  ASSERT_TRUE(layout.ok()) << layout.status().message();
  EXPECT_EQ(layout->chunkRows, 100);
  EXPECT_EQ(layout->spillBytes, 0u);
  // grid.y stops at CUDA's 65535: the CTAs walk the rest.
  EXPECT_EQ(plan.chunkRows(1, 1 << 20), 65535);
  EXPECT_EQ(plan.chunkRows(1, 0), 1);
}

TEST(CheckWorkspace, EnoughAlignedMemoryIsAccepted) {
  EXPECT_TRUE(checkWorkspace(4096, {address(0x10000), 4096}).ok());
  EXPECT_TRUE(checkWorkspace(4096, {address(0x10000), 1 << 20}).ok());
  // Nothing needed: nothing has to be given.
  EXPECT_TRUE(checkWorkspace(0, {}).ok());
  EXPECT_TRUE(checkWorkspace(0, {address(0x10000), 16}).ok());
}

TEST(CheckWorkspace, TooSmallNamesTheSizeNeeded) {
  Status status =
      checkWorkspace(4096, {address(0x10000), 4095, "lina_size_query"});
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::InvalidArgument);
  EXPECT_EQ(status.message(),
            "this call needs a workspace of 4096 bytes, got 4095: pass device "
            "memory of at least 4096 bytes (lina_size_query says how many)");
}

TEST(CheckWorkspace, NoneWhereOneIsNeeded) {
  Status status = checkWorkspace(512, {nullptr, 512});
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message(),
            "this call needs a workspace of 512 bytes and none was given: "
            "pass device memory of at least 512 bytes");
}

TEST(CheckWorkspace, MisalignedIsRefused) {
  Status status = checkWorkspace(512, {address(0x10080), 4096});
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message(), "the workspace must start at a multiple of 256 "
                              "bytes, got 0x10080: pass the start of an "
                              "allocation");
}

// The workspace may not share memory with any tensor of the call: the
// kernels write both at once.
TEST(CheckWorkspace, OverlapWithATensorIsRefused) {
  std::vector<TensorBytes> tensors = {{"q", address(0x10000), 4096},
                                      {"o", address(0x20000), 4096},
                                      {"g", nullptr, 0}};
  EXPECT_TRUE(checkWorkspaceApart(4096, {address(0x30000), 4096}, tensors)
                  .ok());
  // Ends where q starts, starts where o ends: apart.
  EXPECT_TRUE(checkWorkspaceApart(0x1000, {address(0xf000), 4096}, tensors)
                  .ok());
  EXPECT_TRUE(checkWorkspaceApart(256, {address(0x21000), 256}, tensors).ok());
  Status status =
      checkWorkspaceApart(512, {address(0x20f00), 512}, tensors);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::InvalidArgument);
  EXPECT_EQ(status.message(),
            "the workspace (0x20f00, 512 bytes) overlaps 'o' (0x20000, 4096 "
            "bytes): pass memory apart from the call's tensors");
  // Only the bytes the call needs count: a larger lent buffer may reach
  // past them.
  EXPECT_TRUE(
      checkWorkspaceApart(256, {address(0xff00), 1 << 20}, tensors).ok());
  // Nothing needed: nothing to keep apart.
  EXPECT_TRUE(checkWorkspaceApart(0, {address(0x10000), 64}, tensors).ok());
}

} // namespace
