//===- TuneProgress.h - A tune's progress lines -----------------*- C++ -*-===//
//
// Part of lina. One line per candidate on stderr, as it is looked at:
//
//   [ 7/12] C64 tv128 w4 fused           0.8120 ms   elapsed 14 s, ETA 10 s
//
// Always stderr, as cargo and pip print theirs: stdout stays the result
// (the table, or --json's object) whether or not it is a terminal, and a
// redirected stderr still logs how the tune went. The lines are plain (no
// redrawing), so a log file reads as the terminal did; --quiet drops them.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TOOLS_TUNEPROGRESS_H
#define LINA_TOOLS_TUNEPROGRESS_H

#include <chrono>
#include <cstddef>
#include <string>

namespace lina::cli {

class TuneProgress {
public:
  /// For a tune that looks at `limit` candidates at most (a fast tune's
  /// budget; it may end sooner), with schedule names up to `nameWidth`
  /// characters. Prints nothing when `quiet`. The clock starts now.
  TuneProgress(size_t limit, int nameWidth, bool quiet);

  /// The `index`th candidate (from 1): its name, its result ("0.8120 ms"
  /// or a status), whether it was tried now (else read from the cache),
  /// and a note for the end of the line ("" for none).
  void candidate(size_t index, const std::string &name,
                 const std::string &result, bool triedNow,
                 const std::string &note);
  /// A line of its own between candidates, e.g. what is compiled.
  void note(const std::string &text);

  /// "elapsed 14 s, ETA 10 s" after the `index`th candidate, given the
  /// seconds since the start and how many candidates were tried (not read
  /// back) so far: the ETA assumes each candidate left takes as long as
  /// those tried did. No ETA before any was tried or after the last.
  static std::string timing(size_t index, size_t limit, double elapsed,
                            size_t tried);

private:
  size_t limit;
  int nameWidth;
  bool quiet;
  size_t tried = 0;
  std::chrono::steady_clock::time_point start;
};

} // namespace lina::cli

#endif // LINA_TOOLS_TUNEPROGRESS_H
