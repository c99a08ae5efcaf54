//===- HeadLoop.h - Shared plumbing of the reference forms ------*- C++ -*-===//
//
// Part of lina. Private to reference/lib. The recurrent and the parallel form
// differ only in how they compute one (sequence, value head); everything
// around that (checking the problem, finding the sequence's tokens, gathering
// the inputs, scattering outputs and final states) lives here once, so the two
// forms cannot disagree about layout.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_REFERENCE_LIB_HEADLOOP_H
#define LINA_REFERENCE_LIB_HEADLOOP_H

#include "lina/Reference/Reference.h"

#include <cstdint>
#include <vector>

namespace lina::reference::detail {

/// Where one sequence lies in the [B, T] token grid: batch row `batchIndex`,
/// tokens [begin, end) of it.
struct SequenceTokens {
  int64_t batchIndex = 0;
  int64_t begin = 0;
  int64_t end = 0;
};

/// The tokens of sequence `seq`: batch row `seq` when varlen is off, the
/// cuSeqlens slice of batch row 0 when it is on.
SequenceTokens sequenceTokens(const Problem &p, int64_t seq);

/// Computes one (sequence, value head). On entry `state` holds S_0 ([K, V]
/// row-major); on return it holds S_T. `o` has room for [len, V] outputs.
using HeadSolver = void (*)(const HeadInputs &in, std::vector<double> &state,
                            std::vector<double> &o);

/// Checks `p` (aborting with checkShapes' message, prefixed by `caller`, when
/// it is inconsistent), runs `solve` on every (sequence, value head) and
/// assembles the Result.
Result forEachHead(const Problem &p, const char *caller, HeadSolver solve);

} // namespace lina::reference::detail

#endif // LINA_REFERENCE_LIB_HEADLOOP_H
