//===- ExportTest.cpp - Export and import -------------------------------===//
//
// Part of lina. An export imported into a fresh cache gives back every
// cubin and candidate; a bad import file is refused and changes nothing.
//
//===----------------------------------------------------------------------===//
#include "CacheTestUtil.h"

#include <gtest/gtest.h>

using namespace lina::cache;
using namespace lina::cache::test;

namespace {

/// A cache at \p path with two cubins and two tuning keys.
void fill(Cache &cache) {
  ASSERT_TRUE(cache.putCubin("c1", randomBytes(70000, 1)));
  ASSERT_TRUE(cache.putCubin("c2", "small"));
  Candidate failed;
  failed.schedule = {128, 64, 8, "materialize"};
  failed.status = CandidateStatus::CompileError;
  failed.error = "shared memory 300 KiB > 227 KiB";
  ASSERT_TRUE(cache.recordCandidate(testKey("a"), okCandidate(64, 32, 4, 1.5)));
  ASSERT_TRUE(cache.recordCandidate(testKey("a"), failed));
  ASSERT_TRUE(cache.recordCandidate(testKey("b"), okCandidate(32, 64, 2, 0.7)));
}

/// Everything in \p cache as text, to compare two caches or one cache
/// before and after.
std::string snapshot(Cache &cache) {
  std::string s;
  for (const CacheEntry &e : cache.listEntries())
    s += e.key + " " + std::to_string(e.bytes) + " " +
         std::to_string(e.candidates) + "\n";
  for (const char *bucket : {"a", "b"})
    for (const Candidate &c : cache.candidates(testKey(bucket)))
      s += std::string(bucket) + " " + c.schedule.str() + " " +
           toString(c.status) + " " +
           (c.timeMs ? std::to_string(*c.timeMs) : "-") + " " + c.error + " " +
           std::to_string(c.createdAt) + "\n";
  for (const char *key : {"c1", "c2"})
    s += std::string(key) + " " +
         std::to_string(cache.getCubin(key).value_or("").size()) + "\n";
  return s;
}

TEST(Export, RoundTripIntoAFreshCache) {
  TempDir tmp;
  Cache source = Cache::open(tmp.file("a.db"), quiet());
  fill(source);
  std::string error;
  ASSERT_TRUE(source.exportTo(tmp.file("export.db"), &error)) << error;
  // One self-contained file.
  EXPECT_FALSE(fileExists(tmp.file("export.db-wal")));
  EXPECT_FALSE(
      fileExists(tmp.file("export.db.tmp-" + std::to_string(getpid()))));

  Cache target = Cache::open(tmp.file("b.db"), quiet());
  ImportStats stats;
  ASSERT_TRUE(target.importFrom(tmp.file("export.db"), &error, &stats))
      << error;
  EXPECT_EQ(stats.cubins, 2);
  EXPECT_EQ(stats.tunings, 2);
  EXPECT_EQ(stats.candidates, 3);
  EXPECT_EQ(snapshot(target), snapshot(source));
  EXPECT_EQ(target.getCubin("c1"), randomBytes(70000, 1));
  EXPECT_EQ(target.best(testKey("a"))->timeMs, 1.5);

  // Importing again changes nothing (equal rows are not newer).
  ASSERT_TRUE(target.importFrom(tmp.file("export.db"), &error, &stats));
  EXPECT_EQ(stats.cubins + stats.tunings + stats.candidates, 0);
  EXPECT_TRUE(target.warnings().empty());
  EXPECT_TRUE(source.warnings().empty());
}

TEST(Export, InMemoryCacheExportsToo) {
  TempDir tmp;
  Cache source = Cache::openInMemory(quiet());
  fill(source);
  std::string error;
  ASSERT_TRUE(source.exportTo(tmp.file("export.db"), &error)) << error;
  Cache target = Cache::openInMemory(quiet());
  ASSERT_TRUE(target.importFrom(tmp.file("export.db"), &error)) << error;
  EXPECT_EQ(snapshot(target), snapshot(source));
}

TEST(Export, ImportKeepsTheNewerRow) {
  TempDir tmp;
  TuningKey key = testKey("a");
  Cache source = Cache::open(tmp.file("a.db"), quiet());
  ASSERT_TRUE(source.recordCandidate(key, okCandidate(64, 32, 4, 1.0)));
  ASSERT_TRUE(source.recordCandidate(key, okCandidate(64, 64, 4, 3.0)));
  ASSERT_TRUE(source.exportTo(tmp.file("export.db")));

  std::string targetPath = tmp.file("b.db");
  Cache target = Cache::open(targetPath, quiet());
  ASSERT_TRUE(target.recordCandidate(key, okCandidate(64, 32, 4, 2.0)));
  ASSERT_TRUE(target.recordCandidate(key, okCandidate(64, 64, 4, 4.0)));
  {
    // Make the target's tile_v=32 row older and its tile_v=64 row newer
    // than the export's.
    RawDb raw(targetPath);
    ASSERT_EQ(raw.exec("UPDATE candidates SET created = created - 100 WHERE "
                       "tile_v = 32; UPDATE candidates SET created = created "
                       "+ 100 WHERE tile_v = 64"),
              "");
  }
  ASSERT_TRUE(target.importFrom(tmp.file("export.db")));
  for (const Candidate &c : target.candidates(key)) {
    if (c.schedule.tileV == 32)
      EXPECT_EQ(c.timeMs, 1.0) << "the imported row is newer";
    else
      EXPECT_EQ(c.timeMs, 4.0) << "the local row is newer";
  }
}

/// Imports \p file into a filled cache and expects a refusal mentioning
/// \p reason with the cache unchanged.
void expectRefused(const TempDir &tmp, const std::string &file,
                   const std::string &reason,
                   const ScheduleCheck &check = {}) {
  Cache target = Cache::open(tmp.file("target.db"), quiet());
  target.clear();
  fill(target);
  // Something only the target has, which a partial import would keep, and
  // something the import file may have.
  ASSERT_TRUE(target.putCubin("only-here", "x"));
  std::string before = snapshot(target);
  size_t entries = target.listEntries().size();
  std::string error;
  ImportStats stats;
  stats.cubins = -1;
  EXPECT_FALSE(target.importFrom(file, &error, &stats, check));
  EXPECT_NE(error.find(reason), std::string::npos) << error;
  EXPECT_EQ(stats.cubins, -1) << "stats are set only on success";
  EXPECT_EQ(snapshot(target), before);
  EXPECT_EQ(target.listEntries().size(), entries);
  EXPECT_TRUE(target.warnings().empty());
}

TEST(Import, RefusesRandomBytes) {
  TempDir tmp;
  writeFile(tmp.file("bad.db"), randomBytes(20000, 5));
  expectRefused(tmp, tmp.file("bad.db"), "is not a SQLite database");
}

TEST(Import, RefusesAForeignDatabase) {
  TempDir tmp;
  {
    RawDb raw(tmp.file("other.db"));
    ASSERT_EQ(raw.exec("CREATE TABLE cubins(key TEXT, blob BLOB)"), "");
  }
  expectRefused(tmp, tmp.file("other.db"), "another application");
}

TEST(Import, RefusesATruncatedExport) {
  TempDir tmp;
  Cache source = Cache::open(tmp.file("a.db"), quiet());
  fill(source);
  for (int i = 0; i < 10; ++i)
    ASSERT_TRUE(source.putCubin("big" + std::to_string(i),
                                randomBytes(65536, unsigned(100 + i))));
  ASSERT_TRUE(source.exportTo(tmp.file("export.db")));
  std::string bytes = readFile(tmp.file("export.db"));
  writeFile(tmp.file("half.db"), bytes.substr(0, bytes.size() / 2));
  expectRefused(tmp, tmp.file("half.db"), "truncated");
}

TEST(Import, RefusesABadChecksum) {
  TempDir tmp;
  Cache source = Cache::open(tmp.file("a.db"), quiet());
  fill(source);
  ASSERT_TRUE(source.putCubin("new-cubin", "y"));
  ASSERT_TRUE(source.exportTo(tmp.file("export.db")));
  {
    RawDb raw(tmp.file("export.db"));
    ASSERT_EQ(raw.exec("UPDATE cubins SET blob = X'00' WHERE key = 'c2'"), "");
  }
  expectRefused(tmp, tmp.file("export.db"), "cubin c2 does not match");
}

TEST(Import, RefusesATamperedTuningKey) {
  TempDir tmp;
  Cache source = Cache::open(tmp.file("a.db"), quiet());
  fill(source);
  ASSERT_TRUE(source.exportTo(tmp.file("export.db")));
  {
    RawDb raw(tmp.file("export.db"));
    ASSERT_EQ(raw.exec("UPDATE tunings SET sm_count = 1"), "");
  }
  expectRefused(tmp, tmp.file("export.db"), "does not match its fields");
}

TEST(Import, RefusesValuesOfTheWrongType) {
  // Found while fuzzing the import: SQLite stores text in an INTEGER or
  // REAL column, and such a time read back as 0 ms.
  TempDir tmp;
  Cache source = Cache::open(tmp.file("a.db"), quiet());
  fill(source);
  ASSERT_TRUE(source.exportTo(tmp.file("export.db")));
  for (const char *tamper : {"UPDATE candidates SET time_ms = 'fast'",
                             "UPDATE candidates SET created = 'x'",
                             "UPDATE cubins SET created = 'yesterday'",
                             "UPDATE cubins SET blob = 'text, not a blob'",
                             "UPDATE tunings SET created = X'0102'",
                             "UPDATE candidates SET warps = 'four'"}) {
    writeFile(tmp.file("bad.db"), readFile(tmp.file("export.db")));
    {
      RawDb raw(tmp.file("bad.db"));
      ASSERT_EQ(raw.exec(tamper), "") << tamper;
    }
    SCOPED_TRACE(tamper);
    expectRefused(tmp, tmp.file("bad.db"), "hold values of the wrong type");
  }
}

/// A check as the tuner passes one (lina::storedScheduleProblem, which
/// this library does not link): chunk sizes 16 to 128.
std::string chunkCheck(const Schedule &s) {
  for (int64_t chunk : {16, 32, 64, 128})
    if (s.chunkSize == chunk)
      return "";
  return "chunk size " + std::to_string(s.chunkSize) + " is not tried";
}

TEST(Import, RefusesImpossibleRowsNamingThem) {
  // Each would become what kernels of the bucket use: a negative time
  // wins every lookup, as does a chunk size no tune tries if it is the
  // fastest. One bad row refuses the whole file (the target is unchanged:
  // expectRefused), however many good rows it has.
  TempDir tmp;
  Cache source = Cache::open(tmp.file("a.db"), quiet());
  fill(source);
  ASSERT_TRUE(source.exportTo(tmp.file("export.db")));
  const std::string row = "candidate chunk=64 tile_v=32 warps=4 fused of "
                          "tuning key " +
                          testKey("a").digest().substr(0, 16) + " ";
  const char *one = " WHERE chunk_size = 64 AND tile_v = 32";
  struct Case {
    std::string tamper, reason;
    ScheduleCheck check;
  };
  for (const Case &c : std::vector<Case>{
           {std::string("UPDATE candidates SET time_ms = -1.0") + one,
            row + "has a time of -1 ms, not a finite number >= 0"},
           {std::string("UPDATE candidates SET time_ms = 9e999") + one,
            row + "has a time of inf ms, not a finite number >= 0"},
           {std::string("UPDATE candidates SET time_ms = -9e999") + one,
            row + "has a time of -inf ms"},
           {std::string("UPDATE candidates SET warps = 0") + one,
            "candidate chunk=64 tile_v=32 warps=0 fused of tuning key " +
                testKey("a").digest().substr(0, 16) +
                " has a schedule number below 1"},
           {std::string("UPDATE candidates SET chunk_size = 7 WHERE "
                        "chunk_size = 64"),
            "candidate chunk=7 tile_v=32 warps=4 fused of tuning key " +
                testKey("a").digest().substr(0, 16) +
                " is no schedule a tune records: chunk size 7 is not tried",
            chunkCheck}}) {
    writeFile(tmp.file("bad.db"), readFile(tmp.file("export.db")));
    {
      RawDb raw(tmp.file("bad.db"));
      ASSERT_EQ(raw.exec(c.tamper), "") << c.tamper;
    }
    SCOPED_TRACE(c.tamper);
    expectRefused(tmp, tmp.file("bad.db"), c.reason, c.check);
  }
  // The same file with sound rows imports under the same check.
  Cache target = Cache::openInMemory(quiet());
  std::string error;
  EXPECT_TRUE(target.importFrom(tmp.file("export.db"), &error, nullptr,
                                chunkCheck))
      << error;
}

TEST(Import, RefusesANewerSchema) {
  TempDir tmp;
  Cache source = Cache::open(tmp.file("a.db"), quiet());
  fill(source);
  ASSERT_TRUE(source.exportTo(tmp.file("export.db")));
  {
    RawDb raw(tmp.file("export.db"));
    ASSERT_EQ(raw.exec("PRAGMA user_version = " +
                       std::to_string(kSchemaVersion + 1)),
              "");
  }
  expectRefused(tmp, tmp.file("export.db"), "newer");
}

TEST(Import, RefusesAMissingFile) {
  TempDir tmp;
  expectRefused(tmp, tmp.file("nope.db"), "no such file");
  EXPECT_FALSE(fileExists(tmp.file("nope.db")));
}

TEST(Export, NotOntoTheCacheItself) {
  TempDir tmp;
  Cache cache = Cache::open(tmp.file("lina.db"), quiet());
  fill(cache);
  std::string before = snapshot(cache);
  std::string error;
  EXPECT_FALSE(cache.exportTo(tmp.file("lina.db"), &error));
  EXPECT_NE(error.find("is the cache itself"), std::string::npos) << error;
  EXPECT_FALSE(cache.importFrom(tmp.file("lina.db"), &error));
  EXPECT_NE(error.find("is the cache itself"), std::string::npos) << error;
  EXPECT_EQ(snapshot(cache), before);
  Cache reopened = Cache::open(tmp.file("lina.db"), quiet());
  EXPECT_EQ(snapshot(reopened), before);
}

TEST(Export, UnwritableTargetFailsCleanly) {
  TempDir tmp;
  Cache source = Cache::openInMemory(quiet());
  fill(source);
  std::string error;
  EXPECT_FALSE(source.exportTo(tmp.file("missing/dir/export.db"), &error));
  EXPECT_NE(error.find("cannot write"), std::string::npos) << error;
  EXPECT_TRUE(source.warnings().empty());
}

} // namespace
