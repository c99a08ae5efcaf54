//===- TuneStore.cpp - Where a tune records, and for which GPU ---------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/TuneStore.h"

#include "lina/Autotune/CostModel.h"
#include "lina/Autotune/KernelLoader.h"

#include <atomic>

namespace lina {

namespace {
/// Whether a tune opened the process's cache: processNotSaved() must not
/// open it (creating the file) after a dry run.
std::atomic<bool> opened{false};
} // namespace

TuneStore TuneStore::open(cache::Cache *given) {
  TuneStore store;
  if (given) {
    store.db = given;
    return store;
  }
  store.db = processCache();
  opened = true;
  if (!store.db) {
    store.memory = std::make_unique<cache::Cache>(cache::Cache::openInMemory());
    store.db = store.memory.get();
  }
  return store;
}

std::string TuneStore::notSavedReason() const {
  if (memory)
    return "LINA_CACHE is off: kept in memory only";
  return db ? db->notSavedReason() : "";
}

std::string TuneStore::processNotSaved() {
  cache::Cache *db = opened ? processCache() : nullptr;
  return db ? db->notSavedReason() : "";
}

TuneTarget tuneTarget(const cuda::Device *device, bool simulate,
                      int64_t smCount) {
  if (simulate || !device)
    return {{kSimulatedGpu, "sm_90", smCount, kSimulatedGpu}, kSimulatedGpu};
  return {gpuIdentity(*device), nvrtcVersionString()};
}

DeviceLimits deviceLimits(const cuda::Device &device) {
  DeviceLimits limits;
  limits.sharedMemoryPerBlockOptin = device.sharedMemoryPerBlockOptin;
  limits.sharedMemoryPerSM = device.sharedMemoryPerSM;
  limits.smCount = device.smCount;
  limits.maxThreadsPerBlock = device.maxThreadsPerBlock;
  limits.maxThreadsPerSM = device.maxThreadsPerSM;
  limits.registersPerBlock = device.registersPerBlock;
  limits.registersPerSM = device.registersPerSM;
  limits.arch = device.arch;
  return limits;
}

} // namespace lina
