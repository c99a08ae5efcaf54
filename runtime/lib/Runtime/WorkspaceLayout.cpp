//===- WorkspaceLayout.cpp - What a call keeps in its workspace -------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Runtime/WorkspaceLayout.h"

#include <algorithm>
#include <initializer_list>
#include <string>

namespace lina {

namespace {

Status invalid(const std::string &message) {
  return Status::error(StatusCode::InvalidArgument, message);
}

/// The product of `factors` (none negative) in `out`; false when it
/// overflows 62 bits, which leaves room for the sums that follow.
bool product(std::initializer_list<int64_t> factors, uint64_t &out) {
  unsigned __int128 value = 1;
  for (int64_t f : factors) {
    value *= static_cast<uint64_t>(f);
    if (value >> 62)
      return false;
  }
  out = static_cast<uint64_t>(value);
  return true;
}

size_t roundUp256(size_t bytes) { return (bytes + 255) / 256 * 256; }

/// As ForwardChecks' shape checks, for a shape given without pointers.
Status checkShape(const Spec &spec, const CallShape &shape) {
  if (shape.batch < 1 || shape.seqLen < 0)
    return invalid("batch must be at least 1 and seqLen at least 0, got " +
                   std::to_string(shape.batch) + " and " +
                   std::to_string(shape.seqLen));
  if (spec.varlen && (shape.batch != 1 || shape.numSequences < 1))
    return invalid("varlen packs sequences along T: batch must be 1 and "
                   "numSequences at least 1, got " +
                   std::to_string(shape.batch) + " and " +
                   std::to_string(shape.numSequences));
  return Status();
}

Status tooLarge(const CallShape &shape) {
  return invalid("the call is too large: B = " + std::to_string(shape.batch) +
                 ", T = " + std::to_string(shape.seqLen) + ", N = " +
                 std::to_string(shape.numSequences) +
                 " give a workspace whose size overflows 64 bits");
}

/// Chunks a carry CTA walks: about two thousand CTAs in all, so that the
/// carry fills the GPU while each CTA loads its start state once for
/// several chunks (H200, 2x16384x16x128 in 8 segments: 1024, 2048 and 4096
/// CTAs took 133, 133 and 139 us); and few enough runs that a combine CTA
/// keeps every run's decay in shared memory (Segments.cuh's
/// kMaxRunProducts).
int64_t carryRunChunks(int64_t segmentCount, int64_t segments,
                       int64_t valueHeads, int64_t chunksPerSegment,
                       int64_t gateColumns) {
  constexpr int64_t kMaxRunProducts = 4096;
  int64_t chunks = std::max<int64_t>(chunksPerSegment, 1);
  int64_t perCTA = (segmentCount * valueHeads * chunks + 2047) / 2048;
  int64_t maxRuns = std::max<int64_t>(
      kMaxRunProducts / (segments * std::max<int64_t>(gateColumns, 1)), 1);
  perCTA = std::max({perCTA, (chunks + maxRuns - 1) / maxRuns, int64_t(4)});
  return std::min(perCTA, chunks);
}

} // namespace

Expected<ForwardWorkspaceLayout>
forwardWorkspaceLayout(const KernelPlan &plan, const CallShape &shape,
                       int64_t smCount) {
  const Spec &s = plan.spec;
  LINA_RETURN_IF_ERROR(checkShape(s, shape));
  uint64_t tokens = 0;
  if (!product({shape.batch, shape.seqLen}, tokens))
    return tooLarge(shape);
  ForwardArgs args;
  args.batch = shape.batch;
  args.seqLen = shape.seqLen;
  args.numSequences = shape.numSequences;
  ForwardWorkspaceLayout layout;
  layout.pieces = segmentsFor(plan, args, smCount);
  const int64_t sequences = s.varlen ? shape.numSequences : shape.batch;
  const int64_t segments = layout.pieces.count;
  uint64_t scanSequences = 0;
  if (!product({sequences, segments}, scanSequences))
    return tooLarge(shape);
  const int64_t chunkSize = std::max<int64_t>(plan.chunkSize, 1);
  const int64_t chunks = (layout.pieces.length + chunkSize - 1) / chunkSize;
  layout.runChunks =
      carryRunChunks(static_cast<int64_t>(scanSequences), segments,
                     s.valueHeads, chunks, plan.segmentGateColumns);
  layout.runs = (chunks + layout.runChunks - 1) / layout.runChunks;
  if (plan.strategy == Strategy::FusedScan)
    return layout; // one kernel: the state stays on chip
  uint64_t records = 0, states = 0, decays = 0;
  if (!product({plan.workspaceSlots(static_cast<int64_t>(tokens),
                                    static_cast<int64_t>(scanSequences)),
                s.valueHeads, plan.workspaceRecordFloats(), 4},
               records) ||
      !product({static_cast<int64_t>(scanSequences), s.valueHeads, s.keyDim,
                s.valueDim, 4},
               states) ||
      !product({static_cast<int64_t>(scanSequences), s.valueHeads,
                layout.runs, plan.segmentGateColumns, 4},
               decays))
    return tooLarge(shape);
  layout.recordBytes = roundUp256(records);
  if (segments > 1) {
    layout.segmentStatesBytes = states;
    layout.segmentBytes = states + states / 2 + decays;
  }
  // Never empty: a split plan that stores nothing still hands its kernels
  // a record pointer, which must be valid memory.
  layout.bytes =
      std::max<size_t>(layout.recordBytes + layout.segmentBytes, 256);
  return layout;
}

Expected<BackwardWorkspaceLayout>
backwardWorkspaceLayout(const BackwardPlan &plan, const CallShape &shape) {
  const Spec &s = plan.spec;
  LINA_RETURN_IF_ERROR(checkShape(s, shape));
  const int64_t sequences = s.varlen ? shape.numSequences : shape.batch;
  BackwardWorkspaceLayout layout;
  uint64_t tokens = 0, states = 0, ctas = 0, spills = 0;
  if (!product({shape.batch, shape.seqLen}, tokens) ||
      !product({plan.workspaceSlots(static_cast<int64_t>(tokens), sequences),
                s.valueHeads, s.keyDim, s.valueDim, plan.chunkStateBytes()},
               states) ||
      !product({sequences, s.valueHeads, plan.valueTiles()}, ctas))
    return tooLarge(shape);
  layout.ctas = static_cast<int64_t>(ctas);
  // Packed sequences: as many rows as the whole pack has chunks.
  layout.chunkRows = plan.chunkRows(
      layout.ctas, (shape.seqLen + plan.chunkSize - 1) / plan.chunkSize);
  if (!product({layout.ctas, layout.chunkRows, plan.spillFloats, 4}, spills))
    return tooLarge(shape);
  layout.stateBytes = roundUp256(states);
  layout.gradBytes = layout.stateBytes;
  layout.spillBytes = spills;
  uint64_t records = 0;
  if (!product({plan.workspaceSlots(static_cast<int64_t>(tokens), sequences),
                s.valueHeads, plan.recordFloats, 4},
               records))
    return tooLarge(shape);
  layout.recordBytes = roundUp256(records);
  layout.bytes = layout.stateBytes + layout.gradBytes + layout.recordBytes +
                 layout.spillBytes;
  return layout;
}

} // namespace lina
