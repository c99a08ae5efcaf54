//===- TuneBackward.h - lina tune --backward ----------------------*- C++ -*-===//
//
// Part of lina. The backward half of `lina tune`: the backward's schedules
// (chunk size, tile-v, warps) for a spec at a shape, searched like the
// forward's (fast or full), each candidate checked against the float64
// backward, timed with CUDA events and recorded in lina's cache, where
// backward kernels made for shapes of the bucket find the winner
// (BackwardTuneSession.h).
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TOOLS_TUNEBACKWARD_H
#define LINA_TOOLS_TUNEBACKWARD_H

#include "CommandLine.h"
#include "SpecSource.h"

#include "lina/Spec/Spec.h"

namespace lina::cli {

/// Runs the backward tune for `spec` at `shape` with the options `lina
/// tune` parsed (`mode` fast or full, `budget` for fast). Returns the exit
/// code.
int tuneBackward(const ArgParser &options, const Spec &spec,
                 const ProblemShape &shape, const std::string &mode,
                 size_t budget);

} // namespace lina::cli

#endif // LINA_TOOLS_TUNEBACKWARD_H
