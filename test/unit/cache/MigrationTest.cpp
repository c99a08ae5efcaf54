//===- MigrationTest.cpp - Caches an older lina wrote -------------------===//
//
// Part of lina. A cache of schema version 1 (lina 0.1) keeps every entry:
// opened, it is migrated in place; read-only, its in-memory copy is; an
// export of it imports as it is. Names stored since version 2 reach the
// rows.
//
//===----------------------------------------------------------------------===//
#include "CacheTestUtil.h"
#include "FaultVfs.h"

#include "lina/Autotune/Sha256.h"

#include <gtest/gtest.h>

using namespace lina::cache;
using namespace lina::cache::test;

namespace {

/// Schema version 1 as lina 0.1 created it, verbatim, with one cubin and
/// one tuning key (testKey()) holding two candidates.
void makeVersion1(const std::string &path) {
  RawDb raw(path);
  TuningKey key = testKey();
  std::string sql = R"sql(
CREATE TABLE cubins(
  key TEXT PRIMARY KEY,
  blob BLOB NOT NULL,
  checksum TEXT NOT NULL,
  created INTEGER NOT NULL);
CREATE TABLE tunings(
  id INTEGER PRIMARY KEY,
  key TEXT NOT NULL UNIQUE,
  spec TEXT NOT NULL,
  gpu TEXT NOT NULL,
  arch TEXT NOT NULL,
  sm_count INTEGER NOT NULL,
  driver TEXT NOT NULL,
  nvrtc TEXT NOT NULL,
  lina TEXT NOT NULL,
  bucket TEXT NOT NULL,
  created INTEGER NOT NULL);
CREATE TABLE candidates(
  tuning_id INTEGER NOT NULL REFERENCES tunings(id) ON DELETE CASCADE,
  chunk_size INTEGER NOT NULL,
  tile_v INTEGER NOT NULL,
  warps INTEGER NOT NULL,
  strategy TEXT NOT NULL,
  status TEXT NOT NULL CHECK(status IN
    ('ok', 'compile_error', 'launch_error', 'mismatch', 'timeout')),
  time_ms REAL,
  error TEXT NOT NULL DEFAULT '',
  created INTEGER NOT NULL,
  PRIMARY KEY(tuning_id, chunk_size, tile_v, warps, strategy));
PRAGMA application_id = 1818848865;
PRAGMA user_version = 1;
)sql";
  ASSERT_EQ(raw.exec(sql), "");
  ASSERT_EQ(raw.exec("INSERT INTO cubins VALUES('c1', CAST('cubin' AS BLOB), "
                     "'" +
                     sha256Hex("cubin") + "', 1000)"),
            "");
  ASSERT_EQ(raw.exec("INSERT INTO tunings VALUES(1, '" + key.digest() +
                     "', '" + key.spec + "', '" + key.gpuName + "', '" +
                     key.arch + "', " + std::to_string(key.smCount) + ", '" +
                     key.driverVersion + "', '" + key.nvrtcVersion + "', '" +
                     key.linaVersion + "', '" + key.shapeBucket +
                     "', 1000); INSERT INTO candidates VALUES(1, 64, 64, 4, "
                     "'fused', 'ok', 0.5, '', 1000), (1, 32, 64, 4, 'fused', "
                     "'ok', 0.25, '', 1000)"),
            "");
}

void expectVersion1Entries(Cache &cache) {
  EXPECT_EQ(cache.getCubin("c1"), std::string("cubin"));
  std::vector<Candidate> candidates = cache.candidates(testKey());
  ASSERT_EQ(candidates.size(), 2u);
  EXPECT_EQ(candidates[0].timeMs, 0.25);
  ASSERT_TRUE(cache.best(testKey()).has_value());
  EXPECT_EQ(cache.best(testKey())->schedule.chunkSize, 32);
}

TEST(Migration, Version1IsMigratedInPlaceKeepingEveryEntry) {
  TempDir dir;
  std::string path = dir.file("lina.db");
  makeVersion1(path);
  {
    Cache cache = Cache::open(path, quiet());
    EXPECT_TRUE(cache.warnings().empty()) << cache.warnings().front();
    EXPECT_FALSE(cache.isInMemory());
    EXPECT_TRUE(asideFiles(dir.path()).empty());
    expectVersion1Entries(cache);
  }
  RawDb raw(path, /*readOnly=*/true);
  EXPECT_EQ(raw.queryInt("PRAGMA user_version"), kSchemaVersion);
  // The names a version 1 lina did not keep read as unknown.
  EXPECT_EQ(raw.queryInt("SELECT count(*) FROM cubins WHERE spec_name = '' "
                         "AND arch = ''"),
            1);
  EXPECT_EQ(raw.queryInt("SELECT count(*) FROM tunings WHERE spec_name = ''"),
            1);
  // Opened again: nothing more to do.
  Cache again = Cache::open(path, quiet());
  EXPECT_TRUE(again.warnings().empty());
  expectVersion1Entries(again);
}

TEST(Migration, ATuneOfAMigratedKeyNamesIt) {
  TempDir dir;
  std::string path = dir.file("lina.db");
  makeVersion1(path);
  {
    Cache cache = Cache::open(path, quiet());
    TuningKey key = testKey();
    key.specName = "gdn";
    ASSERT_TRUE(cache.recordCandidate(key, okCandidate(16, 64, 4, 0.75)));
    key.specName = "renamed";
    ASSERT_TRUE(cache.recordCandidate(key, okCandidate(16, 64, 8, 0.75)));
  }
  RawDb raw(path, /*readOnly=*/true);
  // The first name stays.
  EXPECT_EQ(raw.queryInt("SELECT count(*) FROM tunings WHERE spec_name = "
                         "'gdn'"),
            1);
}

TEST(Migration, ReadOnlyVersion1IsMigratedInItsCopy) {
  TempDir dir;
  std::string path = dir.file("lina.db");
  makeVersion1(path);
  std::string bytes = readFile(path);
  {
    FaultVfs vfs(dir.path());
    ASSERT_TRUE(vfs.registered());
    vfs.openReadOnly(true);
    Cache cache = Cache::open(path, quiet());
    EXPECT_TRUE(cache.isInMemory());
    EXPECT_TRUE(cache.holdsFileEntries());
    expectVersion1Entries(cache);
    EXPECT_TRUE(cache.putCubin("new", "x", {"gdn", "sm_90a"}));
  }
  EXPECT_TRUE(readFile(path) == bytes) << "the read-only lina.db changed";
}

TEST(Migration, Version1WithAMissingColumnIsMovedAside) {
  TempDir dir;
  std::string path = dir.file("lina.db");
  {
    RawDb raw(path);
    ASSERT_EQ(raw.exec("CREATE TABLE cubins(key TEXT); CREATE TABLE "
                       "tunings(id INTEGER); CREATE TABLE candidates(x); "
                       "PRAGMA application_id = 1818848865; PRAGMA "
                       "user_version = 1"),
              "");
  }
  Cache cache = Cache::open(path, quiet());
  ASSERT_EQ(cache.warnings().size(), 1u);
  EXPECT_NE(cache.warnings()[0].find("incomplete schema"), std::string::npos)
      << cache.warnings()[0];
  EXPECT_EQ(asideFiles(dir.path()).size(), 1u);
  EXPECT_TRUE(cache.putCubin("k", "v"));
}

TEST(Migration, AVersion1ExportImports) {
  TempDir dir;
  std::string path = dir.file("export.db");
  makeVersion1(path);
  Cache cache = Cache::openInMemory(quiet());
  std::string error;
  ImportStats stats;
  ASSERT_TRUE(cache.importFrom(path, &error, &stats)) << error;
  EXPECT_EQ(stats.cubins, 1);
  EXPECT_EQ(stats.tunings, 1);
  EXPECT_EQ(stats.candidates, 2);
  expectVersion1Entries(cache);
  // Untouched: an import only reads.
  RawDb raw(path, /*readOnly=*/true);
  EXPECT_EQ(raw.queryInt("PRAGMA user_version"), 1);
}

TEST(Migration, NamesAreStoredAndTravel) {
  TempDir dir;
  Cache cache = Cache::open(dir.file("lina.db"), quiet());
  ASSERT_TRUE(cache.putCubin("c", "cubin", {"kda", "sm_90a"}));
  TuningKey key = testKey();
  key.specName = "kda";
  ASSERT_TRUE(cache.recordCandidate(key, okCandidate(64, 64, 4, 1.0)));
  ASSERT_TRUE(cache.exportTo(dir.file("export.db")));
  Cache copy = Cache::open(dir.file("copy.db"), quiet());
  ASSERT_TRUE(copy.importFrom(dir.file("export.db")));
  ASSERT_TRUE(copy.exportTo(dir.file("again.db")));
  RawDb raw(dir.file("again.db"), /*readOnly=*/true);
  EXPECT_EQ(raw.queryInt("SELECT count(*) FROM cubins WHERE spec_name = "
                         "'kda' AND arch = 'sm_90a'"),
            1);
  EXPECT_EQ(raw.queryInt("SELECT count(*) FROM tunings WHERE spec_name = "
                         "'kda'"),
            1);
}

} // namespace
