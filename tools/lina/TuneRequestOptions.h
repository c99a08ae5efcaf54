//===- TuneRequestOptions.h - `lina tune`'s options as a request -*- C++ -*-===//
//
// Part of lina. The chunk kernel's and the backward's tunes (TuneCommand.cpp,
// TuneBackward.cpp) read the same options into the same TuneRequest and
// open their session the same way; this is that one reading. Inline, as
// the tool's sources are listed in its CMakeLists.txt.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TOOLS_TUNEREQUESTOPTIONS_H
#define LINA_TOOLS_TUNEREQUESTOPTIONS_H

#include "CommandLine.h"
#include "SpecSource.h"

#include "lina/Autotune/BasicTuneSession.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <thread>

namespace lina::cli {

/// The request for `shape` in `mode` ("fast" or "full"; `budget` for fast)
/// with --simulate, --dry-run, --stop-after, --repeat, --warmup and --jobs.
/// Throws UsageError for an option out of range.
inline TuneRequest tuneRequestFromOptions(const ArgParser &p,
                                          const ProblemShape &shape,
                                          const std::string &mode,
                                          size_t budget) {
  bool dryRun = p.has("dry-run"), simulate = p.has("simulate");
  TuneRequest request;
  request.batch = shape.batch;
  request.seqLen = shape.seqLen;
  request.mode = mode == "full" ? TuneMode::Full : TuneMode::Fast;
  request.budget = budget;
  request.simulate = simulate;
  request.dryRun = dryRun;
  // Read only where they matter, so that a dry run or a simulated tune is
  // not refused for a timing option it would ignore.
  if (!dryRun)
    request.maxNewTrials = p.getInt("stop-after", 1, 1000000, 0);
  if (!dryRun && !simulate) {
    request.repeats = p.getInt("repeat", 1, 1000, 10);
    request.warmup = p.getInt("warmup", 0, 1000, 3);
    request.jobs = p.getInt("jobs", 1, 256,
                            std::max(1u, std::thread::hardware_concurrency()));
  }
  return request;
}

/// The session for `spec` and `request`. Throws UsageError for what the
/// user asked wrong (InvalidArgument), else the error (e.g. no GPU) with a
/// hint that `dryRunCommand` (e.g. "lina tune --dry-run") needs none.
template <typename Kind>
BasicTuneSession<Kind> openTuneSession(const Spec &spec,
                                       const TuneRequest &request,
                                       const std::string &dryRunCommand) {
  Expected<BasicTuneSession<Kind>> opened =
      BasicTuneSession<Kind>::open(spec, request);
  if (!opened.ok()) {
    if (opened.status().code() == StatusCode::InvalidArgument)
      throw UsageError(opened.message());
    throw std::runtime_error(opened.message() + " ('" + dryRunCommand +
                             "' lists the candidates without a GPU)");
  }
  return std::move(*opened);
}

} // namespace lina::cli

#endif // LINA_TOOLS_TUNEREQUESTOPTIONS_H
