//===- BackwardCheck.h - `lina run --backward` ------------------*- C++ -*-===//
//
// Part of lina. The float64 backward reference against finite differences of
// the forward one, on a random problem: a user's way to see that the
// gradients of a spec are right before any backward kernel exists.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TOOLS_BACKWARDCHECK_H
#define LINA_TOOLS_BACKWARDCHECK_H

#include "CommandLine.h"

#include "lina/Reference/Problem.h"

#include <random>

namespace lina::cli {

/// Throws UsageError for options --backward does not go with.
void checkBackwardOptions(const ArgParser &p);

/// Throws UsageError when finite differences on `problem` would take too
/// long.
void checkBackwardShape(const reference::Problem &problem);

/// Draws dO (and dFinalState when the spec has a final state) from `rng`,
/// prints each gradient's relative error against finite differences and
/// PASS or FAIL. Returns the exit code: 0 when every one is within
/// tolerance, else 1.
int runBackwardCheck(const reference::Problem &problem, std::mt19937_64 &rng);

} // namespace lina::cli

#endif // LINA_TOOLS_BACKWARDCHECK_H
