//===- TuneCandidateText.h - How `lina tune` writes a candidate -*- C++ -*-===//
//
// Part of lina. A candidate's time or status, the first line of its error
// and its progress line, as the forward's and the backward's tunes print
// them (TuneCommand.cpp, TuneBackward.cpp), so that both read alike. Inline:
// the helpers are a few lines, and the tool's sources are listed in its
// CMakeLists.txt, which this header leaves alone.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TOOLS_TUNECANDIDATETEXT_H
#define LINA_TOOLS_TUNECANDIDATETEXT_H

#include "TuneProgress.h"

#include "lina/Autotune/Cache.h"
#include "lina/Autotune/Tuner.h"

#include <cstdio>
#include <string>

namespace lina::cli {

/// "0.8120 ms" for a candidate that ran, else its status ("mismatch").
inline std::string timeText(const cache::Candidate &c) {
  if (c.status == cache::CandidateStatus::Ok && c.timeMs) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4f ms", *c.timeMs);
    return buf;
  }
  return cache::toString(c.status);
}

/// The first line of `text`, cut to `max` characters ("..." marks a cut):
/// NVRTC's errors carry the numbered source, and a table row has one line.
inline std::string firstLine(const std::string &text, size_t max) {
  std::string line = text.substr(0, text.find('\n'));
  return line.size() > max ? line.substr(0, max) + "..." : line;
}

/// The progress line of the candidate of `e`, named `name`, through
/// `progress`: its result, and whether it was recorded earlier, why it
/// failed or that it is the best so far.
inline void reportProgress(TuneProgress &progress, const TuneEvent &e,
                           const std::string &name) {
  const cache::Candidate &c = *e.candidate;
  std::string note;
  auto add = [&](const std::string &part) {
    note += (note.empty() ? "" : "; ") + part;
  };
  if (e.recorded)
    add("recorded earlier");
  if (c.status != cache::CandidateStatus::Ok && !c.error.empty())
    add(firstLine(c.error, 60));
  else if (e.best && e.best->schedule == c.schedule)
    add("best so far");
  progress.candidate(e.index, name, timeText(c), !e.recorded, note);
}

} // namespace lina::cli

#endif // LINA_TOOLS_TUNECANDIDATETEXT_H
