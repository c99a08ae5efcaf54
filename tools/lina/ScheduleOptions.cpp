//===- ScheduleOptions.cpp - Schedule flags shared by subcommands ------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "ScheduleOptions.h"

namespace lina::cli {

void addScheduleOptions(ArgParser &p) {
  p.option("chunk-size", "16|32|64|128", "tokens per chunk (default: by dims)");
  p.option("tile-v", "N", "value columns per CTA (default: by dims)");
  p.option("warps", "N", "warps per CTA (default: 8)");
  p.option("strategy", "fused|materialize|split",
           "kernel strategy (default: split for delta, dplr and per-channel "
           "gates, else fused)");
  p.flag("prefetch", "load the next chunk's tiles while computing this one "
                     "(kernels that walk the chunks; not yet the default)");
}

ScheduleOptions scheduleFromOptions(const ArgParser &p, const Spec &spec) {
  ScheduleOptions s = defaultSchedule(spec);
  s.chunkSize = p.getInt("chunk-size", 1, 1024, s.chunkSize);
  s.tileV = p.getInt("tile-v", 1, 1024, s.tileV);
  s.warps = p.getInt("warps", 1, 32, s.warps);
  std::string strategy = p.get("strategy");
  if (!strategy.empty() && !parseStrategy(strategy, s.strategy))
    throw UsageError("--strategy must be fused, materialize or split, got '" +
                     strategy + "'");
  s.prefetch = s.prefetch || p.has("prefetch");
  return s;
}

} // namespace lina::cli
