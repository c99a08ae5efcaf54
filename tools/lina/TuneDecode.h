//===- TuneDecode.h - lina tune --decode --------------------------*- C++ -*-===//
//
// Part of lina. The decode half of `lina tune`: every schedule of
// decodeScheduleSpace (warp columns x warps) for a batch and a number of
// tokens per call, each checked against the float64 decode reference, timed
// with CUDA events and recorded in lina's cache, where decode kernels with an
// open schedule find it (DecodeTuning.h).
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TOOLS_TUNEDECODE_H
#define LINA_TOOLS_TUNEDECODE_H

#include "CommandLine.h"
#include "SpecSource.h"

#include "lina/Spec/Spec.h"

namespace lina::cli {

/// Runs the decode tune for `spec` at `shape` (its seqLen is the tokens per
/// call, 1 to 16) with the options `lina tune` parsed. Returns the exit code.
int tuneDecode(const ArgParser &options, const Spec &spec,
               const ProblemShape &shape);

} // namespace lina::cli

#endif // LINA_TOOLS_TUNEDECODE_H
