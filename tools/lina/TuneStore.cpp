//===- TuneStore.cpp - Where a tune records, and for which GPU ---------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "TuneStore.h"

#include "lina/Autotune/CostModel.h"
#include "lina/Autotune/KernelLoader.h"

namespace lina::cli {

TuneStore TuneStore::open() {
  TuneStore store;
  store.db = processCache();
  if (!store.db) {
    store.memory = std::make_unique<cache::Cache>(cache::Cache::openInMemory());
    store.db = store.memory.get();
  }
  return store;
}

std::string TuneStore::where() const {
  return memory ? "recorded in an in-memory cache (LINA_CACHE is off)"
                : "recorded in " + db->path();
}

TuneTarget tuneTarget(const cuda::Device *device, bool simulate,
                      int64_t smCount) {
  if (simulate || !device)
    return {{kSimulatedGpu, "sm_90", smCount, kSimulatedGpu}, kSimulatedGpu};
  return {gpuIdentity(*device), nvrtcVersionString()};
}

} // namespace lina::cli
