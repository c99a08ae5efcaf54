//===- TuneReport.h - `lina tune --report FILE.html` ------------*- C++ -*-===//
//
// Part of lina. One self-contained HTML file (inline CSS and SVG, no script,
// nothing fetched) that shows what a tune found: every candidate's time in
// one panel per chunk size, by tile-v across and strategy in colour, the
// pruned and failed ones in bands under the axis, the winner and the
// default marked; then every candidate in a table with its reason.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TOOLS_TUNEREPORT_H
#define LINA_TOOLS_TUNEREPORT_H

#include "TuneSummary.h"

#include <string>

namespace lina::cli {

/// The page.
std::string renderTuneReport(const TuneSummary &summary);

/// Why `path` cannot take the report, checked before the tune so that a
/// long tune is not lost to a typo: its directory is missing or not
/// writable, or it is a directory. "" when it looks writable.
std::string reportPathProblem(const std::string &path);

/// Writes the page to `path` atomically (a temporary file beside it,
/// renamed over it), so that a failed write leaves any earlier report
/// whole. "" on success, else why it failed.
std::string writeTuneReport(const std::string &path,
                            const TuneSummary &summary);

} // namespace lina::cli

#endif // LINA_TOOLS_TUNEREPORT_H
