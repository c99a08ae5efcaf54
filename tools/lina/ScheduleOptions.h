//===- ScheduleOptions.h - Schedule flags shared by subcommands -*- C++ -*-===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TOOLS_SCHEDULEOPTIONS_H
#define LINA_TOOLS_SCHEDULEOPTIONS_H

#include "CommandLine.h"
#include "lina/Codegen/KernelPlanner.h"

namespace lina::cli {

/// Declares --chunk-size, --tile-v, --warps, --strategy, --prefetch,
/// --no-prefetch, --shared-state and --direct-decay.
void addScheduleOptions(ArgParser &parser);

/// Whether any of those flags was given (then the schedule is the user's,
/// not a tuned one).
bool scheduleFlagGiven(const ArgParser &parser);

/// defaultSchedule(spec) with the flags given applied.
ScheduleOptions scheduleFromOptions(const ArgParser &parser, const Spec &spec);

} // namespace lina::cli

#endif // LINA_TOOLS_SCHEDULEOPTIONS_H
