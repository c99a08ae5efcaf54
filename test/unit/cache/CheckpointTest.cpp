//===- CheckpointTest.cpp - The database file alone holds the cache ----===//
//
// Part of lina. In WAL mode a commit goes to lina.db-wal; only a checkpoint
// copies it into lina.db. The process-wide cache is never closed, so
// without a checkpoint at exit a tune's results lived in the WAL alone and
// a copy of lina.db (a backup, a file moved to another machine) held none
// of them. When no lina process runs, lina.db must be the whole cache.
//
//===----------------------------------------------------------------------===//
#include "CacheTestUtil.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <sys/wait.h>

using namespace lina::cache;
using namespace lina::cache::test;

namespace {

/// True when \p path does not exist or is empty.
bool absentOrEmpty(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) != 0 || st.st_size == 0;
}

/// Copies \p path, without its WAL, into \p dir and opens the copy.
Cache openCopy(const std::string &path, const TempDir &dir) {
  writeFile(dir.file("lina.db"), readFile(path));
  return Cache::open(dir.file("lina.db"), quiet());
}

/// What a tune stores: a cubin of several pages and two candidates.
bool store(Cache &cache) {
  return cache.putCubin("cubin", randomBytes(100000, 1)) &&
         cache.recordCandidate(testKey(), okCandidate(64, 64, 4, 2.0)) &&
         cache.recordCandidate(testKey(), okCandidate(32, 32, 4, 1.0));
}

void expectStored(Cache &copy) {
  EXPECT_TRUE(copy.warnings().empty());
  EXPECT_TRUE(copy.getCubin("cubin") == randomBytes(100000, 1));
  EXPECT_EQ(copy.candidates(testKey()).size(), 2u);
  ASSERT_TRUE(copy.best(testKey()));
  EXPECT_EQ(copy.best(testKey())->timeMs, 1.0);
}

TEST(Checkpoint, ExitWithACacheStillOpenLeavesItAllInTheFile) {
  TempDir tmp;
  std::string path = tmp.file("lina.db");
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // As processCache(): opened once and never closed, the process ends
    // with exit() and its atexit handlers.
    auto *cache = new Cache(Cache::open(path, quiet()));
    std::exit(!cache->isInMemory() && store(*cache) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);

  EXPECT_TRUE(absentOrEmpty(path + "-wal"));
  TempDir other;
  Cache copy = openCopy(path, other);
  expectStored(copy);
}

TEST(Checkpoint, ExportLeavesItAllInTheFile) {
  TempDir tmp;
  std::string path = tmp.file("lina.db");
  Cache cache = Cache::open(path, quiet());
  ASSERT_TRUE(store(cache));
  std::string error;
  ASSERT_TRUE(cache.exportTo(tmp.file("export.db"), &error)) << error;
  // The cache is still open: the file holds everything all the same.
  EXPECT_TRUE(absentOrEmpty(path + "-wal"));
  TempDir other;
  Cache copy = openCopy(path, other);
  expectStored(copy);
}

TEST(Checkpoint, ClosingTheLastConnectionLeavesItAllInTheFile) {
  TempDir tmp;
  std::string path = tmp.file("lina.db");
  {
    Cache cache = Cache::open(path, quiet());
    ASSERT_TRUE(store(cache));
  }
  EXPECT_TRUE(absentOrEmpty(path + "-wal"));
  TempDir other;
  Cache copy = openCopy(path, other);
  expectStored(copy);
}

} // namespace
