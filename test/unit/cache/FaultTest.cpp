//===- FaultTest.cpp - Faults while the cache is in use ----------------===//
//
// Part of lina. Disk full, I/O error and read-only (through FaultVfs, so
// that they happen as root too), a lock held by another process past the
// busy timeout, and the cache directory deleted while in use. In every case
// the caller's write still succeeds and stays readable in this process, one
// warning is given, and the file keeps everything it held before.
//
//===----------------------------------------------------------------------===//
#include "CacheTestUtil.h"
#include "FaultVfs.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <sys/wait.h>
#include <unistd.h>

using namespace lina::cache;
using namespace lina::cache::test;

namespace {

/// What every test stores before the fault: a cubin of several pages and a
/// candidate.
void storeBefore(Cache &cache) {
  ASSERT_EQ(cache.notSavedReason(), "");
  ASSERT_TRUE(cache.holdsFileEntries());
  ASSERT_TRUE(cache.putCubin("before", randomBytes(20000, 1)));
  ASSERT_TRUE(cache.recordCandidate(testKey(), okCandidate(64, 64, 4, 1.0)));
}

/// After the fault: the write succeeds, both entries are readable, and
/// further writes and reads add no warning. Returns the warnings.
std::vector<std::string> writeThroughFault(Cache &cache) {
  EXPECT_TRUE(cache.putCubin("after", randomBytes(20000, 2)));
  EXPECT_TRUE(cache.isInMemory());
  EXPECT_EQ(cache.getCubin("after"), randomBytes(20000, 2));
  EXPECT_EQ(cache.getCubin("before"), randomBytes(20000, 1));
  EXPECT_TRUE(cache.recordCandidate(testKey(), okCandidate(32, 64, 4, 0.5)));
  EXPECT_EQ(cache.candidates(testKey()).size(), 2u);
  EXPECT_EQ(cache.best(testKey())->timeMs, 0.5);
  EXPECT_TRUE(cache.putCubin("later", "x"));
  EXPECT_EQ(cache.getCubin("later"), std::string("x"));
  // Callers that must not report success (`lina cache import`, `lina
  // tune`) learn the warning's cause, and that the entries are the file's.
  std::string why = cache.notSavedReason();
  EXPECT_NE(why, "");
  EXPECT_NE(cache.warnings().at(0).find(why), std::string::npos) << why;
  EXPECT_TRUE(cache.holdsFileEntries());
  return cache.warnings();
}

/// The file holds exactly what was stored before the fault, and is sound.
void expectFileUnchanged(const std::string &path) {
  {
    RawDb raw(path, /*readOnly=*/true);
    ASSERT_TRUE(raw.ok());
    sqlite3_stmt *s = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(raw.get(), "PRAGMA integrity_check", -1, &s,
                                 nullptr),
              SQLITE_OK);
    ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
    EXPECT_STREQ(reinterpret_cast<const char *>(sqlite3_column_text(s, 0)),
                 "ok");
    sqlite3_finalize(s);
  }
  Cache cache = Cache::open(path, quiet());
  EXPECT_FALSE(cache.isInMemory());
  EXPECT_TRUE(cache.warnings().empty());
  EXPECT_EQ(cache.getCubin("before"), randomBytes(20000, 1));
  EXPECT_EQ(cache.getCubin("after"), std::nullopt);
  ASSERT_EQ(cache.candidates(testKey()).size(), 1u);
  EXPECT_EQ(cache.candidates(testKey())[0].timeMs, 1.0);
}

struct WriteFault {
  const char *name;
  int code;
  int after; ///< successful writes before the fault: mid-commit when > 0
  const char *message;
};

class WriteFaults : public ::testing::TestWithParam<WriteFault> {};

TEST_P(WriteFaults, WriteGoesToMemoryAndTheFileKeepsItsEntries) {
  const WriteFault &fault = GetParam();
  TempDir tmp;
  std::string path = tmp.file("lina.db");
  FaultVfs vfs(tmp.path());
  ASSERT_TRUE(vfs.registered());
  {
    Cache cache = Cache::open(path, quiet());
    ASSERT_FALSE(cache.isInMemory());
    storeBefore(cache);
    vfs.failWrites(fault.code, fault.after);
    std::vector<std::string> warnings = writeThroughFault(cache);
    EXPECT_GT(vfs.failedWrites(), 0);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("could not store a cubin in the cache " + path),
              std::string::npos)
        << warnings[0];
    EXPECT_NE(warnings[0].find(fault.message), std::string::npos)
        << warnings[0];
    EXPECT_NE(warnings[0].find("in-memory copy"), std::string::npos)
        << warnings[0];
  }
  vfs.clear();
  expectFileUnchanged(path);
}

INSTANTIATE_TEST_SUITE_P(
    Faults, WriteFaults,
    ::testing::Values(
        WriteFault{"DiskFull", SQLITE_FULL, 0, "database or disk is full"},
        WriteFault{"DiskFullMidCommit", SQLITE_FULL, 2,
                   "database or disk is full"},
        WriteFault{"IoError", SQLITE_IOERR_WRITE, 0, "disk I/O error"},
        WriteFault{"IoErrorMidCommit", SQLITE_IOERR_WRITE, 3, "disk I/O error"},
        WriteFault{"ReadOnly", SQLITE_READONLY, 0, "readonly database"}),
    [](const auto &info) { return std::string(info.param.name); });

TEST(Faults, DiskFullWhenCreatingTheFile) {
  TempDir tmp;
  FaultVfs vfs(tmp.path());
  vfs.failWrites(SQLITE_FULL);
  Cache cache = Cache::open(tmp.file("lina.db"), quiet());
  EXPECT_TRUE(cache.isInMemory());
  ASSERT_EQ(cache.warnings().size(), 1u);
  EXPECT_NE(cache.warnings()[0].find("database or disk is full"),
            std::string::npos)
      << cache.warnings()[0];
  EXPECT_NE(cache.notSavedReason().find("database or disk is full"),
            std::string::npos)
      << cache.notSavedReason();
  EXPECT_FALSE(cache.holdsFileEntries());
  EXPECT_TRUE(cache.putCubin("k", "v"));
  EXPECT_EQ(cache.getCubin("k"), std::string("v"));
  EXPECT_EQ(cache.warnings().size(), 1u);
}

TEST(Faults, ReadOnlyFileIsServedFromAnInMemoryCopy) {
  TempDir tmp;
  std::string path = tmp.file("lina.db");
  FaultVfs vfs(tmp.path());
  {
    Cache cache = Cache::open(path, quiet());
    storeBefore(cache);
  }
  vfs.openReadOnly(true);
  {
    Cache cache = Cache::open(path, quiet());
    std::vector<std::string> warnings = writeThroughFault(cache);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("the cache " + path + " is read-only"),
              std::string::npos)
        << warnings[0];
    EXPECT_NE(warnings[0].find("in-memory copy"), std::string::npos);
  }
  vfs.clear();
  expectFileUnchanged(path);
}

/// Forks a child that holds a write transaction on \p path until told to
/// let go. The parent must have no connection open at the fork: SQLite's
/// per-process lock bookkeeping must not be shared with the child.
class LockHolder {
public:
  explicit LockHolder(const std::string &path) {
    if (pipe(ready) != 0 || pipe(release) != 0)
      return;
    pid = fork();
    if (pid == 0) {
      RawDb raw(path);
      char c = raw.exec("BEGIN EXCLUSIVE") == "" ? 'y' : 'n';
      (void)!write(ready[1], &c, 1);
      (void)!read(release[0], &c, 1);
      _exit(raw.exec("ROLLBACK") == "" ? 0 : 3);
    }
    char c = 0;
    held = pid > 0 && read(ready[0], &c, 1) == 1 && c == 'y';
  }
  /// Lets go and reaps the child; its exit status (0: clean).
  int finish() {
    if (pid <= 0)
      return -1;
    (void)!write(release[1], "x", 1);
    int status = -1;
    waitpid(pid, &status, 0);
    pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  ~LockHolder() { finish(); }
  bool held = false;

private:
  int ready[2] = {-1, -1}, release[2] = {-1, -1};
  pid_t pid = -1;
};

TEST(Faults, LockHeldByAnotherProcessPastTheBusyTimeout) {
  TempDir tmp;
  std::string path = tmp.file("lina.db");
  {
    Cache cache = Cache::open(path, quiet());
    storeBefore(cache);
  }
  LockHolder holder(path);
  ASSERT_TRUE(holder.held);
  {
    CacheOptions options = quiet();
    options.busyTimeoutMs = 200;
    Cache cache = Cache::open(path, options);
    ASSERT_FALSE(cache.isInMemory()) << "reading is not blocked in WAL mode";
    std::vector<std::string> warnings = writeThroughFault(cache);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("database is locked: another process held it "
                               "for over 200 ms"),
              std::string::npos)
        << warnings[0];
  }
  EXPECT_EQ(holder.finish(), 0);
  expectFileUnchanged(path);
}

TEST(Faults, CacheDirectoryDeletedWhileInUse) {
  TempDir tmp;
  std::string dir = tmp.file("cache");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  std::string path = dir + "/lina.db";
  Cache cache = Cache::open(path, quiet());
  storeBefore(cache);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  ASSERT_FALSE(ec) << ec.message();
  std::vector<std::string> warnings = writeThroughFault(cache);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("the cache " + path +
                             " was deleted or replaced while this process "
                             "used it"),
            std::string::npos)
      << warnings[0];
  // Nothing is written behind the user's back: the directory stays gone.
  EXPECT_FALSE(fileExists(dir));
}

} // namespace
