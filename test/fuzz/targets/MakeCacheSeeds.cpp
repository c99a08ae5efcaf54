//===- MakeCacheSeeds.cpp - Seed files for the cache import fuzzer ------===//
//
// Part of lina. Writes exports of small caches to the directory given: an
// empty one, one with cubins and a tuning run, and the same with 512-byte
// pages (a few pages, so mutations reach every structure). scripts/fuzz.sh
// runs it; its output at the time is committed as test/fuzz/cache-corpus.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/Cache.h"

#include <sqlite3.h>

#include <cstdio>
#include <string>
#include <unistd.h>

using namespace lina::cache;

namespace {

void fill(Cache &cache) {
  cache.putCubin("cubin-sm90-gdn", std::string("\x7f"
                                               "ELF cubin",
                                               10));
  cache.putCubin("cubin-empty", "");
  TuningKey key;
  key.spec = "decay=scalar update=delta key_dim=64 value_dim=64";
  key.gpuName = "NVIDIA H200";
  key.arch = "sm_90";
  key.smCount = 132;
  key.driverVersion = "13000";
  key.nvrtcVersion = "13.0";
  key.shapeBucket = "bh=1..8,t=1..256";
  Candidate ok;
  ok.schedule = {64, 64, 4, "fused"};
  ok.status = CandidateStatus::Ok;
  ok.timeMs = 0.25;
  cache.recordCandidate(key, ok);
  Candidate bad;
  bad.schedule = {128, 64, 8, "materialize"};
  bad.status = CandidateStatus::CompileError;
  bad.error = "too much shared memory";
  cache.recordCandidate(key, bad);
}

bool smallPages(const std::string &path) {
  sqlite3 *db = nullptr;
  bool ok = sqlite3_open(path.c_str(), &db) == SQLITE_OK &&
            sqlite3_exec(db, "PRAGMA page_size = 512; VACUUM", nullptr, nullptr,
                         nullptr) == SQLITE_OK;
  sqlite3_close(db);
  return ok;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make-cache-seeds DIR\n");
    return 2;
  }
  std::string dir = argv[1];
  std::string error;
  bool ok = Cache::openInMemory().exportTo(dir + "/empty.db", &error);
  Cache full = Cache::openInMemory();
  fill(full);
  ok = ok && full.exportTo(dir + "/tuned.db", &error) &&
       full.exportTo(dir + "/tuned-512.db", &error) &&
       smallPages(dir + "/tuned-512.db");
  if (!ok)
    std::fprintf(stderr, "make-cache-seeds: %s\n", error.c_str());
  return ok ? 0 : 1;
}
