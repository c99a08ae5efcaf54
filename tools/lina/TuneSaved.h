//===- TuneSaved.h - Where `lina tune` says results went --------*- C++ -*-===//
//
// Part of lina. Shared by the chunk and the decode halves of `lina tune`.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TOOLS_TUNESAVED_H
#define LINA_TOOLS_TUNESAVED_H

#include "lina/Autotune/TuneStore.h"

#include <string>

namespace lina::cli {

/// "recorded in PATH", or why nothing will be found later.
std::string recordedWhere(const TuneStore &store);

/// A tune's exit status from `status`, the one its printing ended with: a
/// tune whose results were not saved still printed its timings (they are
/// worth having), but it has not done what it was asked, so this ends the
/// output with "lina tune: warning: results not saved: REASON" on stderr
/// and gives 1; the warning the cache gave when it happened may be far
/// above, among the progress lines.
int finishTune(int status);

} // namespace lina::cli

#endif // LINA_TOOLS_TUNESAVED_H
