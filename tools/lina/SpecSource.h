//===- SpecSource.h - A spec from a preset name or an .mlir file -*- C++ -*-===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TOOLS_SPECSOURCE_H
#define LINA_TOOLS_SPECSOURCE_H

#include "CommandLine.h"
#include "lina/Spec/Spec.h"

namespace lina::cli {

/// Declares --dk, --dv, --heads, --value-heads, --dtype on `parser`.
void addSpecOverrideOptions(ArgParser &parser);

/// The spec named by `source`: a preset name, or a path to a .mlir file
/// holding one lina.recurrence. Overrides from `parser` are applied and the
/// result is validated. Throws UsageError with the parser's or verifier's
/// message on any problem.
Spec loadSpec(const std::string &source, const ArgParser &parser);

/// A problem shape from --shape B,T,H[,HV] (required): B, H, HV at least 1,
/// T at least 0.
struct ProblemShape {
  int64_t batch, seqLen, heads, valueHeads;
  bool valueHeadsGiven; ///< HV was written; else valueHeads copies heads
};
/// Declares --shape on `parser`.
void addShapeOption(ArgParser &parser);
/// Reads --shape; throws UsageError naming what is wrong.
ProblemShape parseShapeOption(const ArgParser &parser);
/// Gives `spec` the heads of `shape`: H, and HV where written (without it a
/// grouped spec keeps its ratio of value heads to heads); then validates
/// it. --heads and --value-heads, which --shape replaces, are refused
/// naming `command` (e.g. "lina run"). Throws UsageError.
void takeShapeHeads(const ArgParser &parser, const ProblemShape &shape,
                    const std::string &command, Spec &spec);

} // namespace lina::cli

#endif // LINA_TOOLS_SPECSOURCE_H
