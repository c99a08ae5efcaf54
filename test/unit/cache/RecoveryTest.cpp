//===- RecoveryTest.cpp - Unusable files and locations ------------------===//
//
// Part of lina. Whatever sits at the cache path, opening gives a working
// cache and at most one warning: an unusable file is moved aside and
// rebuilt; an unusable location falls back to memory.
//
//===----------------------------------------------------------------------===//
#include "CacheTestUtil.h"
#include "FaultVfs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <grp.h>
#include <sys/wait.h>

using namespace lina::cache;
using namespace lina::cache::test;

namespace {

/// A cache at \p path holding \p cubins cubins of 64 KiB, closed again.
void makeCache(const std::string &path, int cubins) {
  Cache cache = Cache::open(path, quiet());
  for (int i = 0; i < cubins; ++i)
    ASSERT_TRUE(cache.putCubin("k" + std::to_string(i),
                               randomBytes(65536, unsigned(i))));
  ASSERT_TRUE(cache.recordCandidate(testKey(), okCandidate(64, 64, 4, 1.0)));
}

/// Opens \p dir/lina.db, which the test has spoiled, and checks the
/// outcome: one warning naming \p reason, the file moved aside, a new
/// working cache in its place that later opens without a warning.
void expectMovedAside(const TempDir &dir, const std::string &reason) {
  std::string path = dir.file("lina.db");
  {
    Cache cache = Cache::open(path, quiet());
    std::vector<std::string> warnings = cache.warnings();
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_EQ(warnings[0].rfind("lina: warning: ", 0), 0u) << warnings[0];
    EXPECT_NE(warnings[0].find(reason), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[0].find("moved it to " + path + ".corrupt-"),
              std::string::npos)
        << warnings[0];
    EXPECT_EQ(warnings[0].find('\n'), std::string::npos);
    EXPECT_FALSE(cache.isInMemory());
    EXPECT_EQ(asideFiles(dir.path()).size(), 1u);
    EXPECT_FALSE(cache.getCubin("k0").has_value());
    EXPECT_TRUE(cache.putCubin("new", "cubin"));
    EXPECT_TRUE(cache.recordCandidate(testKey(), okCandidate(32, 32, 4, 2.0)));
  }
  Cache again = Cache::open(path, quiet());
  EXPECT_TRUE(again.warnings().empty());
  EXPECT_EQ(again.getCubin("new"), std::string("cubin"));
  EXPECT_EQ(again.candidates(testKey()).size(), 1u);
  EXPECT_EQ(asideFiles(dir.path()).size(), 1u);
}

/// Checks that opening \p path, a cache of schema 99, leaves it alone: one
/// warning that names the fix, an in-memory cache that works for this
/// process, and the file's bytes (and its WAL's) as they were.
void expectNewerLeftAlone(const TempDir &dir) {
  std::string path = dir.file("lina.db");
  std::string bytes = readFile(path), wal = readFile(path + "-wal");
  {
    Cache cache = Cache::open(path, quiet());
    std::vector<std::string> warnings = cache.warnings();
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_EQ(warnings[0],
              "lina: warning: the cache " + path +
                  " was written by a newer lina (schema 99 > " +
                  std::to_string(kSchemaVersion) +
                  "): it is left untouched; cubins and tuning results of "
                  "this run are not saved; set LINA_CACHE_DIR to use a "
                  "separate cache");
    EXPECT_TRUE(cache.isInMemory());
    EXPECT_EQ(cache.notSavedReason(),
              "the cache " + path + " was written by a newer lina (schema 99 > " +
                  std::to_string(kSchemaVersion) +
                  ") and is left untouched; set LINA_CACHE_DIR to use a "
                  "separate cache");
    EXPECT_FALSE(cache.holdsFileEntries());
    // Its entries are not used: this lina cannot know what they mean now.
    EXPECT_FALSE(cache.getCubin("k0").has_value());
    EXPECT_TRUE(cache.putCubin("new", "cubin"));
    EXPECT_EQ(cache.getCubin("new"), std::string("cubin"));
    EXPECT_TRUE(cache.clear());
  }
  EXPECT_TRUE(asideFiles(dir.path()).empty());
  // (Compared as a whole: a byte-wise diff of a database helps no one.)
  EXPECT_TRUE(readFile(path) == bytes) << "lina.db changed";
  EXPECT_TRUE(readFile(path + "-wal") == wal) << "lina.db-wal changed";
  RawDb raw(path, /*readOnly=*/true);
  EXPECT_EQ(raw.queryInt("PRAGMA user_version"), 99);
  EXPECT_EQ(raw.queryInt("SELECT count(*) FROM cubins"), 2);
}

TEST(Recovery, NewerSchemaIsLeftUntouched) {
  TempDir dir;
  std::string path = dir.file("lina.db");
  makeCache(path, 2);
  {
    RawDb raw(path);
    ASSERT_EQ(raw.exec("PRAGMA user_version = 99"), "");
  }
  ASSERT_FALSE(fileExists(path + "-wal"));
  expectNewerLeftAlone(dir);
  // Again, now that an older lina has met it once.
  expectNewerLeftAlone(dir);
}

TEST(Recovery, ReadOnlyNewerSchemaIsLeftUntouched) {
  TempDir dir;
  std::string path = dir.file("lina.db");
  makeCache(path, 2);
  {
    RawDb raw(path);
    ASSERT_EQ(raw.exec("PRAGMA user_version = 99"), "");
  }
  // Not "cannot open the cache (the file is read-only)": the fix is
  // another directory, not permissions.
  FaultVfs vfs(dir.path());
  ASSERT_TRUE(vfs.registered());
  vfs.openReadOnly(true);
  expectNewerLeftAlone(dir);
}

TEST(Recovery, RunningNewerLinasWalIsNotCheckpointed) {
  TempDir dir;
  std::string path = dir.file("lina.db");
  makeCache(path, 2);
  {
    // A newer lina that is still running: its last commits are in the WAL.
    RawDb raw(path);
    ASSERT_EQ(sqlite3_db_config(raw.get(), SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
                                1, nullptr),
              SQLITE_OK);
    ASSERT_EQ(raw.exec("PRAGMA wal_autocheckpoint = 0; PRAGMA user_version = "
                       "99; DELETE FROM tunings"),
              "");
  }
  ASSERT_GT(readFile(path + "-wal").size(), 0u);
  expectNewerLeftAlone(dir);
}

TEST(Recovery, TruncatedFileIsMovedAside) {
  TempDir dir;
  std::string path = dir.file("lina.db");
  makeCache(path, 20);
  // Closing the last connection checkpoints and removes the WAL, so the
  // database is all in the main file.
  ASSERT_FALSE(fileExists(path + "-wal"));
  std::string bytes = readFile(path);
  ASSERT_GT(bytes.size(), 20u * 65536);
  writeFile(path, bytes.substr(0, bytes.size() / 2));
  expectMovedAside(dir, "truncated");
}

TEST(Recovery, RandomBytesAreMovedAside) {
  TempDir dir;
  writeFile(dir.file("lina.db"), randomBytes(65536, 7));
  expectMovedAside(dir, "is not a SQLite database");
  EXPECT_EQ(readFile(asideFiles(dir.path()).at(0)), randomBytes(65536, 7));
}

TEST(Recovery, TinyFileIsMovedAside) {
  TempDir dir;
  writeFile(dir.file("lina.db"), "hello");
  expectMovedAside(dir, "too short");
}

TEST(Recovery, ForeignDatabaseIsMovedAside) {
  TempDir dir;
  std::string path = dir.file("lina.db");
  {
    RawDb raw(path);
    ASSERT_EQ(raw.exec("CREATE TABLE users(name TEXT); INSERT INTO users "
                       "VALUES('ada')"),
              "");
  }
  expectMovedAside(dir, "another application (tables: users)");
  RawDb old(asideFiles(dir.path()).at(0), /*readOnly=*/true);
  EXPECT_EQ(old.queryInt("SELECT count(*) FROM users"), 1);
}

TEST(Recovery, ForeignTablesWithOurIdAreMovedAside) {
  TempDir dir;
  std::string path = dir.file("lina.db");
  {
    RawDb raw(path);
    ASSERT_EQ(raw.exec("CREATE TABLE cubins(key TEXT); PRAGMA "
                       "application_id = 1818848865; PRAGMA user_version = 1"),
              "");
  }
  expectMovedAside(dir, "incomplete schema");
}

TEST(Recovery, StaleWalMovesWithItsDatabase) {
  TempDir dir;
  std::string path = dir.file("lina.db");
  writeFile(path, randomBytes(8192, 3));
  writeFile(path + "-wal", randomBytes(4096, 4));
  expectMovedAside(dir, "is not a SQLite database");
  EXPECT_TRUE(fileExists(asideFiles(dir.path()).at(0) + "-wal"));
}

TEST(Recovery, EmptyFileIsANewCache) {
  TempDir dir;
  writeFile(dir.file("lina.db"), "");
  Cache cache = Cache::open(dir.file("lina.db"), quiet());
  EXPECT_TRUE(cache.warnings().empty());
  EXPECT_FALSE(cache.isInMemory());
  EXPECT_TRUE(cache.putCubin("k", "v"));
  EXPECT_TRUE(asideFiles(dir.path()).empty());
}

TEST(Recovery, CorruptionFoundLaterRebuildsTheCache) {
  TempDir dir;
  std::string path = dir.file("lina.db");
  makeCache(path, 20);
  // Page 2 is the root of the cubins table: the header and schema stay
  // sound, so the file opens, and the damage shows on the first read.
  std::string bytes = readFile(path);
  ASSERT_GT(bytes.size(), 3u * 4096);
  for (size_t i = 4096; i < 2 * 4096; ++i)
    bytes[i] = '\xff';
  writeFile(path, bytes);

  Cache cache = Cache::open(path, quiet());
  EXPECT_TRUE(cache.warnings().empty());
  EXPECT_FALSE(cache.getCubin("k3").has_value());
  std::vector<std::string> warnings = cache.warnings();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("is corrupt"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("moved it to"), std::string::npos) << warnings[0];
  EXPECT_EQ(asideFiles(dir.path()).size(), 1u);
  EXPECT_FALSE(cache.isInMemory());
  EXPECT_TRUE(cache.putCubin("k3", "again"));
  EXPECT_EQ(cache.getCubin("k3"), std::string("again"));
  EXPECT_EQ(cache.warnings().size(), 1u);
}

TEST(Recovery, WarningIsOneLineOnStderr) {
  TempDir dir;
  writeFile(dir.file("lina.db"), randomBytes(4096, 9));
  testing::internal::CaptureStderr();
  { Cache cache = Cache::open(dir.file("lina.db")); }
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.rfind("lina: warning: the cache ", 0), 0u) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;

  // Silenced: the same event prints nothing but is still recorded.
  writeFile(dir.file("lina.db"), randomBytes(4096, 10));
  testing::internal::CaptureStderr();
  Cache cache = Cache::open(dir.file("lina.db"), quiet());
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(cache.warnings().size(), 1u);
}

//===----------------------------------------------------------------------===//
// Locations that cannot hold a file: in-memory fallback
//===----------------------------------------------------------------------===//

/// Checks an in-memory fallback: one warning naming \p reason, and a cache
/// that works for this process.
void expectInMemory(Cache &cache, const std::string &reason) {
  std::vector<std::string> warnings = cache.warnings();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find(reason), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("in-memory cache"), std::string::npos)
      << warnings[0];
  EXPECT_TRUE(cache.isInMemory());
  EXPECT_EQ(cache.path(), ":memory:");
  EXPECT_NE(cache.notSavedReason(), "");
  EXPECT_NE(warnings[0].find(cache.notSavedReason()), std::string::npos);
  EXPECT_FALSE(cache.holdsFileEntries());
  EXPECT_TRUE(cache.putCubin("k", "v"));
  EXPECT_EQ(cache.getCubin("k"), std::string("v"));
  EXPECT_TRUE(cache.recordCandidate(testKey(), okCandidate(64, 64, 4, 1.0)));
  EXPECT_EQ(cache.best(testKey())->timeMs, 1.0);
}

/// Runs \p checks (which return 0 on success, else which check failed) and
/// returns its result. Root ignores file permissions, so as root the checks
/// run in a child that has become nobody; 77 means that was not possible.
template <typename F> int runUnprivileged(F checks) {
  if (geteuid() != 0)
    return checks();
  pid_t pid = fork();
  if (pid < 0)
    return 77;
  if (pid == 0) {
    if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
      _exit(77);
    _exit(checks());
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
    return 99;
  return WEXITSTATUS(status);
}

/// The in-memory fallback as exit codes, for runUnprivileged().
int fallbackChecks(const std::string &path, const std::string &reason) {
  Cache cache = Cache::open(path, quiet());
  if (!cache.isInMemory())
    return 10;
  std::vector<std::string> w = cache.warnings();
  if (w.size() != 1 || w[0].find("in-memory") == std::string::npos ||
      w[0].find(reason) == std::string::npos)
    return 11;
  if (!cache.putCubin("k", "v") || cache.getCubin("k") != std::string("v"))
    return 12;
  // The cause, with the OS's word for it.
  if (cache.notSavedReason().find(reason) == std::string::npos ||
      cache.notSavedReason().find("ermission denied") == std::string::npos)
    return 13;
  return 0;
}

TEST(Fallback, UnwritableDirectory) {
  TempDir tmp;
  std::string dir = tmp.file("ro");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  // Mode 0555 rather than 0500 so that nobody, whom root becomes to run the
  // checks, may enter it.
  ASSERT_EQ(chmod(tmp.path().c_str(), 0755), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0555), 0);
  int result = runUnprivileged([&] {
    return fallbackChecks(dir + "/lina.db", "cannot open the cache");
  });
  if (result == 77)
    GTEST_SKIP() << "running as root and cannot drop privileges";
  EXPECT_EQ(result, 0);
  EXPECT_FALSE(fileExists(dir + "/lina.db"));
}

TEST(Fallback, ReadOnlyFile) {
  TempDir tmp;
  std::string path = tmp.file("lina.db");
  makeCache(path, 1);
  ASSERT_EQ(chmod(tmp.path().c_str(), 0777), 0);
  ASSERT_EQ(chmod(path.c_str(), 0444), 0);
  int result =
      runUnprivileged([&] { return fallbackChecks(path, "read-only"); });
  if (result == 77)
    GTEST_SKIP() << "running as root and cannot drop privileges";
  EXPECT_EQ(result, 0);
  // Left as it was.
  RawDb raw(path, /*readOnly=*/true);
  EXPECT_EQ(raw.queryInt("SELECT count(*) FROM cubins"), 1);
  EXPECT_TRUE(asideFiles(tmp.path()).empty());
}

TEST(Fallback, CacheDirIsAFile) {
  TempDir tmp;
  writeFile(tmp.file("plain"), "not a directory");
  const char *old = std::getenv("LINA_CACHE_DIR");
  std::string saved = old ? old : "";
  setenv("LINA_CACHE_DIR", tmp.file("plain").c_str(), 1);
  Cache cache = Cache::openDefault(quiet());
  if (old)
    setenv("LINA_CACHE_DIR", saved.c_str(), 1);
  else
    unsetenv("LINA_CACHE_DIR");
  expectInMemory(cache, "cannot use the cache directory " + tmp.file("plain") +
                            " (" + tmp.file("plain") + " is not a directory)");
  EXPECT_EQ(readFile(tmp.file("plain")), "not a directory");

  // The same through open() with a path below the file.
  Cache direct = Cache::open(tmp.file("plain/lina.db"), quiet());
  expectInMemory(direct, "cannot open the cache");
}

TEST(Fallback, DirectoryAtTheFilePath) {
  TempDir tmp;
  ASSERT_EQ(mkdir(tmp.file("lina.db").c_str(), 0700), 0);
  Cache cache = Cache::open(tmp.file("lina.db"), quiet());
  expectInMemory(cache, "not a regular file");
  // A directory is never moved aside: it is not ours to move.
  EXPECT_TRUE(asideFiles(tmp.path()).empty());
}

TEST(Fallback, OpenDefaultUsesTheEnvironment) {
  TempDir tmp;
  const char *old = std::getenv("LINA_CACHE_DIR");
  std::string saved = old ? old : "";
  setenv("LINA_CACHE_DIR", tmp.file("sub/dir").c_str(), 1);
  {
    Cache cache = Cache::openDefault(quiet());
    EXPECT_FALSE(cache.isInMemory());
    EXPECT_EQ(cache.path(), tmp.file("sub/dir/lina.db"));
    EXPECT_TRUE(cache.putCubin("k", "v"));
    EXPECT_TRUE(cache.warnings().empty());
    EXPECT_EQ(cache.notSavedReason(), "");
    EXPECT_TRUE(cache.holdsFileEntries());
  }
  if (old)
    setenv("LINA_CACHE_DIR", saved.c_str(), 1);
  else
    unsetenv("LINA_CACHE_DIR");
  EXPECT_TRUE(fileExists(tmp.file("sub/dir/lina.db")));
}

} // namespace
