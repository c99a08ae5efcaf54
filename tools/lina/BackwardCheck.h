//===- BackwardCheck.h - `lina run --backward` ------------------*- C++ -*-===//
//
// Part of lina. The backward that lina-chunk-backward derives from a spec's
// chunked program, run by the float64 executor, and the float64 backward
// reference, both against finite differences of the forward reference on a
// random problem: a user's way to see that the gradients of a spec are
// right.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TOOLS_BACKWARDCHECK_H
#define LINA_TOOLS_BACKWARDCHECK_H

#include "CommandLine.h"

#include "lina/Codegen/KernelPlanner.h"
#include "lina/Reference/Problem.h"
#include "lina/Transforms/Pipeline.h"

#include <random>

namespace lina::cli {

/// Says on stderr that the float64 reference overflowed on the random
/// inputs (so no gradient can be checked) and prints FAIL; returns 1.
int reportReferenceOverflow();

/// Throws UsageError when finite differences on `problem` would take too
/// long.
void checkBackwardShape(const reference::Problem &problem);

/// Draws dO (and dFinalState when the spec has a final state) from `rng`,
/// prints each gradient's relative error against finite differences, of the
/// chunked backward (built with `chunk`) and of the recurrence, and PASS or
/// FAIL. Returns the exit code: 0 when every one is within tolerance, 1 when
/// one is not, 2 when the chunked program cannot be built.
int runBackwardCheck(const reference::Problem &problem, std::mt19937_64 &rng,
                     const ChunkOptions &chunk);

/// The backward's schedule from --chunk-size, --tile-v and --warps (zero
/// where not given); throws UsageError for the forward's other knobs.
BackwardScheduleOptions backwardScheduleFromOptions(const ArgParser &p);

/// Runs the backward's GPU kernels on `problem` (rounded to the dtype in
/// place) with output gradients drawn from `rng`, prints each gradient's
/// relative error against the float64 backward recurrence, the median time
/// of `repeats` calls (none for 0), and PASS or FAIL; returns the exit code.
/// With no knob in `options` and `useCache`, the schedule is the tuned one
/// for the shape's bucket, else the default; `useCache` also loads the
/// cubins through lina's cache. Without `check` only the time is printed
/// (and the run is not compared: exit code 0 once the kernels ran).
int runGpuBackwardCheck(reference::Problem &problem, std::mt19937_64 &rng,
                        const BackwardScheduleOptions &options, int repeats,
                        bool useCache, bool check = true);

} // namespace lina::cli

#endif // LINA_TOOLS_BACKWARDCHECK_H
