//===- ScheduleOptions.cpp - Schedule flags shared by subcommands ------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "ScheduleOptions.h"

#include "lina/Autotune/ScheduleKnobs.h"

#include <cstdio>
#include <optional>

namespace lina::cli {

namespace {

/// Whether --NAME or --no-NAME was given: the on/off flags, prefetch and
/// those of scheduleFlags() (a flag without a declared --no- form is never
/// given off).
bool onOffGiven(const ArgParser &p, const std::string &name) {
  return p.has(name) || p.has("no-" + name);
}

/// On for --NAME, off for --no-NAME, nullopt for neither; both is an error.
std::optional<bool> onOff(const ArgParser &p, const std::string &name) {
  std::string off = "no-" + name;
  if (p.has(name) && p.has(off))
    throw UsageError("--" + name + " and --" + off + " contradict each other");
  if (p.has(name))
    return true;
  if (p.has(off))
    return false;
  return std::nullopt;
}

/// --mma: true for warpgroup, false for warp, nullopt when not given. The
/// deprecated --wgmma and --no-wgmma still answer, with a warning (once a
/// process: run reads the flags twice).
std::optional<bool> warpgroupFlag(const ArgParser &p) {
  std::optional<bool> old = onOff(p, "wgmma");
  if (old && p.has("mma"))
    throw UsageError(std::string("--mma and --") + (*old ? "" : "no-") +
                     "wgmma: give --mma alone (--wgmma and --no-wgmma are "
                     "its deprecated spellings)");
  if (old) {
    static bool warned = false;
    if (!warned)
      std::fprintf(stderr,
                   "lina: warning: --%swgmma is deprecated; use --mma %s\n",
                   *old ? "" : "no-", *old ? "warpgroup" : "warp");
    warned = true;
    return old;
  }
  if (!p.has("mma"))
    return std::nullopt;
  std::string mma = p.get("mma");
  if (mma != "warp" && mma != "warpgroup")
    throw UsageError("--mma must be warp or warpgroup, got '" + mma + "'");
  return mma == "warpgroup";
}

} // namespace

void addScheduleOptions(ArgParser &p) {
  p.option("chunk-size", "16|32|64|128",
           "tokens per chunk (default: 16; 32 for scalar-gated additive "
           "rules at key_dim <= 64)");
  p.option("tile-v", "N",
           "value columns per CTA (default: 32, or value_dim if less; a "
           "whole d128 head, a warp per 16 columns, when the shape's heads "
           "cover two thirds of the GPU, except for rwkv7 and linear "
           "attention; else 64 for delta and additive rules when the grid "
           "still fills the GPU, except gdn and DeltaNet where it gives "
           "fewer than two CTAs an SM)");
  p.option("warps", "N",
           "warps per CTA (default: 8; 4 for gdn and DeltaNet where they "
           "keep 32 columns on a grid that fills the GPU)");
  p.option("strategy", "fused|materialize|split",
           "kernel strategy (default: split)");
  p.flag("prefetch", "load the next chunk's tiles while computing this one "
                     "(kernels that walk the chunks; default: on)");
  p.flag("no-prefetch", "load each chunk's tiles when the scan reaches it");
  p.flag("shared-state",
         "keep the scan's state in shared memory even where it fits in "
         "registers (for comparison; default: registers where they fit)");
  p.flag("direct-decay",
         "sum per-channel decay products directly instead of factoring them "
         "onto the tensor cores (for comparison; default: factored where a "
         "chunk's gates allow)");
  p.flag("two-ctas",
         "kernels that walk the chunks ask for two CTAs a multiprocessor "
         "where their shared memory allows (default: on for the delta rules' "
         "whole-head scans where the heads outnumber the SMs)");
  p.flag("no-two-ctas", "never ask for two CTAs a multiprocessor");
  p.option("mma", "warp|warpgroup",
           "the matrix products the scans run on: warp, the warp-level "
           "mma.sync products of every GPU since sm_80, or warpgroup, "
           "Hopper's warpgroup products (strategy fused, chunk size 64; "
           "needs an sm_90 GPU): the additive, delta and DPLR "
           "rules (not a DPLR b decayed by its own per-channel gate), "
           "printed from the chunk's ops: any write weight, gates, betas "
           "and norms computed in the kernel, bf16 or f16, key and value "
           "dims 64 or 128, a warpgroup for each 64 value columns of a head "
           "or of a 64-column tile of one (--tile-v 64 --warps 4 or 8; DPLR "
           "at key dim 128 always), chunks of the delta and DPLR rules and "
           "of a per-channel decay prepared first (default: chosen for the "
           "spec, shape and GPU)");
  p.option("barrier-window", "N",
           "with --backward: the gradients kernel moves an op up to N places "
           "to run between the same barriers as ops it does not read "
           "(lina-group-barriers; 0 to 64, default 0: each op just before "
           "its first reader, so tiles die soonest)");
  p.flag("wgmma", "deprecated: --mma warpgroup");
  p.flag("no-wgmma", "deprecated: --mma warp");
  p.option("segments", "N",
           "run each sequence as up to N segments at once, combined after "
           "the scan (split strategy, additive rules with a decay, or the "
           "warpgroup scan, additive rules with a scalar or fixed decay; 1 "
           "to 16; packed varlen sequences are cut each by its own length, "
           "into fewer pieces where a call's sequences already fill the GPU; "
           "default: enough to give the GPU two CTAs an SM where few long "
           "sequences leave it idle, else 1)");
}

bool scheduleFlagGiven(const ArgParser &p) {
  for (const char *option :
       {"chunk-size", "tile-v", "warps", "strategy", "segments", "mma"})
    if (p.has(option))
      return true;
  if (onOffGiven(p, "prefetch") || onOffGiven(p, "wgmma"))
    return true;
  // The flags by the names the cache and the tuner know them by.
  for (const ScheduleKnob &flag : scheduleFlags())
    if (onOffGiven(p, flag.name))
      return true;
  return false;
}

ScheduleOptions scheduleFromOptions(const ArgParser &p, const Spec &spec) {
  return applyScheduleFlags(p, defaultSchedule(spec), spec);
}

ScheduleOptions applyScheduleFlags(const ArgParser &p, ScheduleOptions s,
                                   const Spec &spec) {
  if (p.has("barrier-window") && !p.has("backward"))
    throw UsageError("--barrier-window is a knob of the backward's gradients "
                     "kernel: add --backward");
  // The warpgroup scan has one layout: --mma warpgroup brings it (the
  // knobs given below still apply, and the planner names a clash), --mma
  // warp or a layout asked for without --mma sets a default's warpgroup
  // scan aside. Segments are no layout of it: the additive scan runs them
  // (the delta rule's planner refuses them either way).
  std::optional<bool> warpgroup = warpgroupFlag(p);
  if (warpgroup)
    s = *warpgroup ? withWarpgroup(s, spec) : withoutWarpgroup(s);
  if (!warpgroup)
    for (const char *option : {"chunk-size", "tile-v", "warps", "strategy"})
      if (p.has(option))
        s = withoutWarpgroup(s);
  if (p.has("chunk-size")) {
    // Refused here, before anything runs or prints, rather than by
    // lina-chunk after a run has begun.
    std::string text = p.get("chunk-size");
    if (text != "16" && text != "32" && text != "64" && text != "128")
      throw UsageError("--chunk-size must be 16, 32, 64 or 128, got '" +
                       text + "'");
    s.chunkSize = std::stoll(text);
  }
  s.tileV = p.getInt("tile-v", 1, 1024, s.tileV);
  s.warps = p.getInt("warps", 1, 32, s.warps);
  s.segments = p.getInt("segments", 1, 16, s.segments);
  std::string strategy = p.get("strategy");
  if (!strategy.empty() && !parseStrategy(strategy, s.strategy))
    throw UsageError("--strategy must be fused, materialize or split, got '" +
                     strategy + "'");
  if (std::optional<bool> on = onOff(p, "prefetch"))
    s.prefetch = *on;
  // A flag a default may set (two-ctas) also has a --no- form. (The
  // warpgroup flag is --mma's, above: the parser declares no --warpgroup.)
  for (const ScheduleKnob &flag : scheduleFlags())
    if (std::optional<bool> on = onOff(p, flag.name))
      flag.set(s, *on);
  return s;
}

} // namespace lina::cli
