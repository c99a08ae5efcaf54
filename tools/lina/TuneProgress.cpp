//===- TuneProgress.cpp - A tune's progress lines ----------------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "TuneProgress.h"

#include "HumanUnits.h"

#include <cstdio>

namespace lina::cli {

TuneProgress::TuneProgress(size_t limit, int nameWidth, bool quiet)
    : limit(limit), nameWidth(nameWidth), quiet(quiet),
      start(std::chrono::steady_clock::now()) {}

std::string TuneProgress::timing(size_t index, size_t limit, double elapsed,
                                 size_t tried) {
  std::string text = "elapsed " + formatSeconds(elapsed);
  if (tried > 0 && index < limit)
    text += ", ETA " +
            formatSeconds(elapsed / double(tried) * double(limit - index));
  return text;
}

void TuneProgress::candidate(size_t index, const std::string &name,
                             const std::string &result, bool triedNow,
                             const std::string &note) {
  tried += triedNow;
  if (quiet)
    return;
  double elapsed = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  // The index padded to the limit's width, so that the columns stay put.
  int digits = int(std::to_string(limit).size());
  std::fprintf(stderr, "[%*zu/%zu] %-*s %13s   %s%s\n", digits, index, limit,
               nameWidth, name.c_str(), result.c_str(),
               timing(index, limit, elapsed, tried).c_str(),
               note.empty() ? "" : ("  (" + note + ")").c_str());
}

void TuneProgress::note(const std::string &text) {
  if (!quiet)
    std::fprintf(stderr, "%s\n", text.c_str());
}

} // namespace lina::cli
