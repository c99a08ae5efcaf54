//===- HumanUnits.h - Times, ages and sizes as people write them -*- C++ -*-===//
//
// Part of lina. What `lina cache` and `lina tune` print for a size, an age or
// a stretch of time, and how `--older-than` reads one.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TOOLS_HUMANUNITS_H
#define LINA_TOOLS_HUMANUNITS_H

#include <cstdint>
#include <optional>
#include <string>

namespace lina::cli {

/// "512 B", "48.2 KiB", "1.5 MiB", "2.0 GiB".
std::string formatBytes(int64_t bytes);

/// How long ago something was written, `seconds` before now, to the
/// largest unit that fits: "12 s ago", "3 min ago", "5 h ago", "2 days
/// ago", "4 months ago", "2 years ago". A time in the future (a clock set
/// back) reads "just now".
std::string formatAge(int64_t seconds);

/// A stretch of time for progress lines: "14 s", "2 min 5 s", "1 h 3 min".
std::string formatSeconds(double seconds);

/// "30d", "12h", "90m", "45s" or "2w" (a count of at least 1, then one
/// unit) in seconds; nullopt for anything else or more than 100 years.
std::optional<int64_t> parseDuration(const std::string &text);

} // namespace lina::cli

#endif // LINA_TOOLS_HUMANUNITS_H
