//===- TuneStore.cpp - Where a tune records, and for which GPU ---------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "TuneStore.h"

#include "lina/Autotune/CostModel.h"
#include "lina/Autotune/KernelLoader.h"

#include <cstdio>

namespace lina::cli {

namespace {
/// Whether a tune opened the process's cache: finishTune() must not open
/// it (creating the file) after a dry run.
bool opened = false;
} // namespace

TuneStore TuneStore::open() {
  TuneStore store;
  store.db = processCache();
  opened = true;
  if (!store.db) {
    store.memory = std::make_unique<cache::Cache>(cache::Cache::openInMemory());
    store.db = store.memory.get();
  }
  return store;
}

std::string TuneStore::where() const {
  if (memory)
    return "recorded in an in-memory cache (LINA_CACHE is off)";
  if (!db->notSavedReason().empty())
    return "not recorded in the cache (see the warning below)";
  return "recorded in " + db->path();
}

std::string TuneStore::notSaved() {
  cache::Cache *db = opened ? processCache() : nullptr;
  return db ? db->notSavedReason() : "";
}

int finishTune(int status) {
  std::string reason = TuneStore::notSaved();
  if (reason.empty())
    return status;
  std::fflush(stdout);
  std::fprintf(stderr, "lina tune: warning: results not saved: %s\n",
               reason.c_str());
  return 1;
}

TuneTarget tuneTarget(const cuda::Device *device, bool simulate,
                      int64_t smCount) {
  if (simulate || !device)
    return {{kSimulatedGpu, "sm_90", smCount, kSimulatedGpu}, kSimulatedGpu};
  return {gpuIdentity(*device), nvrtcVersionString()};
}

} // namespace lina::cli
