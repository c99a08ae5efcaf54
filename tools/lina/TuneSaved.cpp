//===- TuneSaved.cpp - Where `lina tune` says results went ------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "TuneSaved.h"

#include <cstdio>

namespace lina::cli {

std::string recordedWhere(const TuneStore &store) {
  if (store.memory)
    return "recorded in an in-memory cache (LINA_CACHE is off)";
  if (!store.db->notSavedReason().empty())
    return "not recorded in the cache (see the warning below)";
  return "recorded in " + store.db->path();
}

int finishTune(int status) {
  std::string reason = TuneStore::processNotSaved();
  if (reason.empty())
    return status;
  std::fflush(stdout);
  std::fprintf(stderr, "lina tune: warning: results not saved: %s\n",
               reason.c_str());
  return 1;
}

} // namespace lina::cli
