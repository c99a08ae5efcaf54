//===- ImportCorpusTest.cpp - The import fuzzer's corpus, replayed -----===//
//
// Part of lina. Every file in test/fuzz/cache-corpus (the seeds, and each
// input the cache import fuzzer ever found breaking CacheImportCheck.h) is
// imported with the same checks, so a fixed crash stays fixed in every
// build, not only under libFuzzer.
//
//===----------------------------------------------------------------------===//
#include "CacheImportCheck.h"
#include "CacheTestUtil.h"

#include <gtest/gtest.h>

#include <filesystem>

using namespace lina::cache;
using namespace lina::cache::test;

namespace {

TEST(ImportCorpus, EveryFileKeepsTheImportPromises) {
  int files = 0, accepted = 0;
  for (const auto &entry :
       std::filesystem::directory_iterator(LINA_CACHE_CORPUS_DIR)) {
    TempDir tmp;
    // Imported from a copy: a rejected import must not have touched it, and
    // SQLite may leave a journal beside the file it reads.
    std::string copy = tmp.file("import.db");
    writeFile(copy, readFile(entry.path().string()));
    EXPECT_EQ(fuzz::checkCacheImport(copy, tmp.path()), "") << entry.path();
    ++files;
    Cache cache = Cache::openInMemory(quiet());
    accepted += cache.importFrom(copy) ? 1 : 0;
  }
  // The seeds are valid exports; without them the corpus proves little.
  EXPECT_GE(files, 3);
  EXPECT_GE(accepted, 3);
}

} // namespace
