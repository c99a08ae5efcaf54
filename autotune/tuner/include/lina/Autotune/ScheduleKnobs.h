//===- ScheduleKnobs.h - The axes of the schedule space ---------*- C++ -*-===//
//
// Part of lina. Each knob of ScheduleOptions as a named axis with the values
// a tune tries. The full sweep takes their cross product and the fast mode's
// coordinate descent moves along one axis at a time, so a knob the kernel
// generator adds to ScheduleOptions joins both by one entry here (and a
// column in the cache's candidates table).
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_SCHEDULEKNOBS_H
#define LINA_AUTOTUNE_SCHEDULEKNOBS_H

#include "lina/Autotune/Candidate.h"
#include "lina/Autotune/SearchKnob.h"
#include "lina/Codegen/KernelPlanner.h"

#include <cstdint>
#include <string>
#include <vector>

namespace lina {

/// A knob of the forward's schedule, named as lina-schedule spells it.
using ScheduleKnob = SearchKnob<ScheduleOptions>;

/// The knobs for `spec`, outermost first: strategy (0 fused, 1 materialize,
/// 2 split: lina::Strategy's values), chunk size, tile-v (powers of two up to
/// min(value_dim, 128)), warps, prefetch (0 or 1).
std::vector<ScheduleKnob> scheduleKnobs(const Spec &spec);

/// The fields of ScheduleOptions that change the kernel but that a tune
/// does not search (shared-state, direct-decay, two-ctas): values 0 and 1.
std::vector<ScheduleKnob> scheduleFlags();

/// Every field that changes the kernel: the knobs, then the flags. What
/// tells two schedules apart (sameSchedule, the kernel cache's key); a new
/// field of ScheduleOptions joins one of the two lists.
std::vector<ScheduleKnob> scheduleFields(const Spec &spec);

/// "C64 tv32 w4 fused" ("... split prefetch"): how tables, logs and the C
/// API's kernel cache name a schedule.
std::string describe(const ScheduleOptions &schedule);

/// True when every field (knob and flag) has the same value in `a` and `b`.
bool sameSchedule(const ScheduleOptions &a, const ScheduleOptions &b);

/// The cache's spelling of a schedule, and back (an unknown strategy reads
/// as fused, which the cache's CHECK-free strategy column cannot rule out).
cache::Schedule toCacheSchedule(const ScheduleOptions &schedule);
ScheduleOptions fromCacheSchedule(const cache::Schedule &schedule);

} // namespace lina

#endif // LINA_AUTOTUNE_SCHEDULEKNOBS_H
