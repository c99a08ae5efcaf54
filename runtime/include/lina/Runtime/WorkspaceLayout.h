//===- WorkspaceLayout.h - What a call keeps in its workspace ---*- C++ -*-===//
//
// Part of lina. The bytes of scratch a forward or backward call of a given
// shape needs and where each part of it lies, as pure functions of the plan
// and the shape: the launchers lay out their workspace with them, and the
// size queries (ChunkKernel::workspaceBytes, lina_kernel_workspace_size)
// answer with them, so the two cannot disagree. No device access.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_RUNTIME_WORKSPACELAYOUT_H
#define LINA_RUNTIME_WORKSPACELAYOUT_H

#include "lina/Runtime/BackwardKernel.h"
#include "lina/Runtime/ChunkKernel.h"

#include <cstddef>
#include <cstdint>

namespace lina {

/// The shape a workspace is sized for: ForwardArgs' batch, seqLen and
/// numSequences (read only when the spec is varlen).
struct CallShape {
  int64_t batch = 1, seqLen = 0, numSequences = 0;
};

inline CallShape shapeOf(const ForwardArgs &args) {
  return {args.batch, args.seqLen, args.numSequences};
}

/// The forward's workspace, in order: a record per (chunk slot, value
/// head) (materialize: the chunk's starting state; split: its stored
/// values), then with segments each piece's own final state (fp32), its
/// true starting state (bf16, half the bytes) and the decay before each of
/// the carry's runs.
struct ForwardWorkspaceLayout {
  /// How the call cuts its sequences (segmentsFor).
  SequencePieces pieces;
  /// Chunks a carry CTA walks, and how many such runs a piece has.
  int64_t runChunks = 0, runs = 0;
  size_t recordBytes = 0; ///< rounded up to 256, so what follows is aligned
  size_t segmentStatesBytes = 0;
  size_t segmentBytes = 0; ///< final states, starting states and decays
  /// All of it, at least 256 bytes; 0 for the fused scan, which keeps
  /// nothing between kernels.
  size_t bytes = 0;
};

/// The layout of a call of `shape` to `plan`'s kernel on a GPU of
/// `smCount` SMs (packed sequences' segments depend on it). InvalidArgument
/// for a shape no call can have (batch < 1, seqLen < 0; varlen with batch
/// != 1 or numSequences < 1) or whose workspace overflows 64 bits.
Expected<ForwardWorkspaceLayout>
forwardWorkspaceLayout(const KernelPlan &plan, const CallShape &shape,
                       int64_t smCount);

/// The backward's workspace: every chunk's starting state, then the state's
/// gradient before every chunk (BackwardPlan::chunkStateBytes an element,
/// each array rounded up to 256 bytes), then the prepare kernels' record
/// a (chunk slot, value head) (BackwardPlan::recordFloats), then each
/// CTA's spill (the tiles its shared memory cannot hold), for the
/// chunk-parallel kernel's grid of `ctas` x `chunkRows` CTAs.
struct BackwardWorkspaceLayout {
  size_t stateBytes = 0;
  size_t gradBytes = 0;
  size_t recordBytes = 0; ///< the prepare kernels' records
  size_t spillBytes = 0;
  size_t bytes = 0;
  int64_t ctas = 0;      ///< a grid row: sequences x value heads x tiles
  int64_t chunkRows = 0; ///< BackwardPlan::chunkRows
};

/// The backward's layout for a call of `shape`; InvalidArgument as
/// forwardWorkspaceLayout's.
Expected<BackwardWorkspaceLayout>
backwardWorkspaceLayout(const BackwardPlan &plan, const CallShape &shape);

} // namespace lina

#endif // LINA_RUNTIME_WORKSPACELAYOUT_H
