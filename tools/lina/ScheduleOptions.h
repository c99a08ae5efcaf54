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
/// --no-prefetch, --mma (which sets scheduleFlags()' warpgroup flag, and
/// its deprecated spellings --wgmma and --no-wgmma), a flag for each of the
/// others of scheduleFlags() (--shared-state, --direct-decay, --two-ctas),
/// by its name there, and --no-two-ctas (a flag a default schedule sets).
void addScheduleOptions(ArgParser &parser);

/// Whether any of those flags was given (then the schedule is the user's,
/// not a tuned one).
bool scheduleFlagGiven(const ArgParser &parser);

/// `base` with the flags given applied; the fields no flag names keep
/// base's values.
ScheduleOptions applyScheduleFlags(const ArgParser &parser,
                                   ScheduleOptions base, const Spec &spec);
/// The same on defaultSchedule(spec) (no shape or GPU known).
ScheduleOptions scheduleFromOptions(const ArgParser &parser, const Spec &spec);

} // namespace lina::cli

#endif // LINA_TOOLS_SCHEDULEOPTIONS_H
