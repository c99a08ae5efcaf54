//===- StoreTest.cpp - Cubins and tuning results round trip -------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "CacheTestUtil.h"

#include <gtest/gtest.h>

#include <ctime>
#include <map>
#include <thread>

using namespace lina::cache;
using namespace lina::cache::test;

namespace {

int64_t unixTimeNow() { return static_cast<int64_t>(std::time(nullptr)); }

TEST(CubinStore, RoundTrip) {
  TempDir tmp;
  std::string path = tmp.file("lina.db");
  // Binary, with NULs, larger than a page; and an empty one.
  std::string blob = randomBytes(100000, 1);
  blob[10] = '\0';
  {
    Cache cache = Cache::open(path, quiet());
    EXPECT_FALSE(cache.isInMemory());
    EXPECT_EQ(cache.path(), path);
    EXPECT_FALSE(cache.getCubin("k1").has_value());
    EXPECT_TRUE(cache.putCubin("k1", blob));
    EXPECT_TRUE(cache.putCubin("empty", ""));
    EXPECT_EQ(cache.getCubin("k1"), blob);
    EXPECT_EQ(cache.getCubin("empty"), std::string());
    EXPECT_TRUE(cache.warnings().empty());
  }
  // A new process (here: a new connection) sees what was stored.
  Cache cache = Cache::open(path, quiet());
  EXPECT_EQ(cache.getCubin("k1"), blob);
  EXPECT_TRUE(cache.putCubin("k1", "replaced"));
  EXPECT_EQ(cache.getCubin("k1"), std::string("replaced"));
  EXPECT_FALSE(cache.getCubin("k2").has_value());
  EXPECT_TRUE(cache.warnings().empty());
}

TEST(CubinStore, ChecksumMismatchIsAMissAndDeletesTheRow) {
  TempDir tmp;
  std::string path = tmp.file("lina.db");
  Cache cache = Cache::open(path, quiet());
  ASSERT_TRUE(cache.putCubin("bad", std::string(5000, 'x')));
  ASSERT_TRUE(cache.putCubin("good", "fine"));
  {
    RawDb raw(path);
    ASSERT_EQ(
        raw.exec("UPDATE cubins SET blob = X'00112233' WHERE key = 'bad'"), "");
  }
  EXPECT_FALSE(cache.getCubin("bad").has_value());
  ASSERT_EQ(cache.warnings().size(), 1u);
  EXPECT_NE(cache.warnings()[0].find("checksum"), std::string::npos)
      << cache.warnings()[0];
  EXPECT_EQ(cache.warnings()[0].rfind("lina: warning: ", 0), 0u);
  RawDb raw(path);
  EXPECT_EQ(raw.queryInt("SELECT count(*) FROM cubins WHERE key = 'bad'"), 0);
  EXPECT_EQ(raw.queryInt("SELECT count(*) FROM cubins WHERE key = 'good'"), 1);
  // Deleted, so the second read is a plain miss with no second warning.
  EXPECT_FALSE(cache.getCubin("bad").has_value());
  EXPECT_EQ(cache.warnings().size(), 1u);
  EXPECT_EQ(cache.getCubin("good"), std::string("fine"));
}

TEST(TuningStore, RoundTripAndBest) {
  TempDir tmp;
  std::string path = tmp.file("lina.db");
  TuningKey key = testKey();
  Candidate slow = okCandidate(64, 64, 4, 2.5);
  Candidate fast = okCandidate(32, 32, 4, 1.25, "materialize");
  Candidate wrong = okCandidate(16, 32, 2, 0.5); // faster, but wrong
  wrong.status = CandidateStatus::Mismatch;
  wrong.error = "max abs error 0.3 at o[0,5,1,7]";
  Candidate broken;
  broken.schedule = {128, 64, 8, "fused"};
  broken.status = CandidateStatus::CompileError;
  broken.error = "too much shared memory\nsecond line";
  {
    Cache cache = Cache::open(path, quiet());
    EXPECT_TRUE(cache.candidates(key).empty());
    EXPECT_FALSE(cache.best(key).has_value());
    for (const Candidate &c : {slow, wrong, broken, fast})
      EXPECT_TRUE(cache.recordCandidate(key, c));
  }
  Cache cache = Cache::open(path, quiet());
  std::vector<Candidate> all = cache.candidates(key);
  ASSERT_EQ(all.size(), 4u);
  // Ok ones fastest first, then the failures in schedule order.
  EXPECT_EQ(all[0].schedule, fast.schedule);
  EXPECT_EQ(all[1].schedule, slow.schedule);
  EXPECT_EQ(all[2].schedule, wrong.schedule);
  EXPECT_EQ(all[3].schedule, broken.schedule);
  EXPECT_EQ(all[0].timeMs, 1.25);
  EXPECT_EQ(all[2].status, CandidateStatus::Mismatch);
  EXPECT_EQ(all[2].error, wrong.error);
  EXPECT_EQ(all[3].status, CandidateStatus::CompileError);
  EXPECT_FALSE(all[3].timeMs.has_value());
  EXPECT_EQ(all[3].error, broken.error);
  EXPECT_GT(all[0].createdAt, 0);

  std::optional<Candidate> best = cache.best(key);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->schedule, fast.schedule);
  EXPECT_EQ(best->schedule.strategy, "materialize");

  // Re-timing a schedule replaces its record; it does not add a row.
  EXPECT_TRUE(cache.recordCandidate(key, okCandidate(64, 64, 4, 0.75)));
  EXPECT_EQ(cache.candidates(key).size(), 4u);
  EXPECT_EQ(cache.best(key)->schedule, slow.schedule);

  // Keys are separate.
  TuningKey other = testKey("bh=1..1,t=1..256");
  EXPECT_TRUE(cache.candidates(other).empty());
  EXPECT_FALSE(cache.best(other).has_value());
  EXPECT_TRUE(cache.warnings().empty());
}

TEST(TuningStore, BestSkipsRowsNoTuneRecords) {
  // Rows that an older lina's import let in, written here behind the
  // cache's back: each is faster than the sound one, and none may win.
  TempDir tmp;
  std::string path = tmp.file("lina.db");
  TuningKey key = testKey();
  {
    Cache cache = Cache::open(path, quiet());
    ASSERT_TRUE(cache.recordCandidate(key, okCandidate(64, 64, 4, 2.0)));
    for (int64_t tile : {16, 32, 128})
      ASSERT_TRUE(
          cache.recordCandidate(key, okCandidate(64, tile, 4, 1.0 + tile)));
  }
  {
    RawDb raw(path);
    ASSERT_EQ(raw.exec("UPDATE candidates SET time_ms = -1.0 WHERE tile_v = "
                       "16; UPDATE candidates SET time_ms = 'fast' WHERE "
                       "tile_v = 32; UPDATE candidates SET chunk_size = 7, "
                       "time_ms = 0.5 WHERE tile_v = 128"),
              "");
  }
  Cache cache = Cache::open(path, quiet());
  auto check = [](const Schedule &s) -> std::string {
    return s.chunkSize == 7 ? "chunk size 7 is not tried" : "";
  };
  for (int round = 0; round < 2; ++round) {
    std::optional<Candidate> best = cache.best(key, check);
    ASSERT_TRUE(best);
    EXPECT_EQ(best->schedule, Schedule({64, 64, 4, "fused"}));
    EXPECT_EQ(best->timeMs, 2.0);
  }
  // One warning per row, not one per lookup. (Text sorts after every
  // number: the text time is never reached while a sound row is there.)
  std::vector<std::string> warnings = cache.warnings();
  ASSERT_EQ(warnings.size(), 2u);
  std::string start = "lina: warning: ignoring candidate ";
  std::string where = " of tuning key " + key.digest().substr(0, 16) +
                      " in the cache " + path + ": it ";
  EXPECT_EQ(warnings[0], start + "chunk=64 tile_v=16 warps=4 fused" + where +
                             "has a time of -1 ms, not a finite number >= 0");
  EXPECT_EQ(warnings[1], start + "chunk=7 tile_v=128 warps=4 fused" + where +
                             "is no schedule a tune records: chunk size 7 is "
                             "not tried");
  // Without the check the chunk size 7 row is taken; the times are the
  // cache's own business and still checked.
  EXPECT_EQ(cache.best(key)->schedule.chunkSize, 7);

  // With no sound row left there is no best, and the text time (read as 0
  // ms by SQLite's conversion) is named too.
  {
    RawDb raw(path);
    ASSERT_EQ(raw.exec("UPDATE candidates SET time_ms = 'slow' WHERE tile_v "
                       "= 64"),
              "");
  }
  EXPECT_FALSE(cache.best(key, check).has_value());
  warnings = cache.warnings();
  ASSERT_EQ(warnings.size(), 4u);
  EXPECT_EQ(warnings[2], start + "chunk=64 tile_v=32 warps=4 fused" + where +
                             "has a time that is not a number");
}

TEST(TuningStore, NoOkCandidateMeansNoBest) {
  Cache cache = Cache::openInMemory(quiet());
  TuningKey key = testKey();
  Candidate timeout;
  timeout.schedule = {64, 64, 4, "fused"};
  timeout.status = CandidateStatus::Timeout;
  EXPECT_TRUE(cache.recordCandidate(key, timeout));
  EXPECT_EQ(cache.candidates(key).size(), 1u);
  EXPECT_FALSE(cache.best(key).has_value());
}

TEST(TuningStore, StatusNames) {
  for (CandidateStatus s :
       {CandidateStatus::Ok, CandidateStatus::CompileError,
        CandidateStatus::LaunchError, CandidateStatus::Mismatch,
        CandidateStatus::Timeout})
    EXPECT_EQ(parseCandidateStatus(toString(s)), s);
  EXPECT_EQ(std::string(toString(CandidateStatus::CompileError)),
            "compile_error");
  EXPECT_FALSE(parseCandidateStatus("fast").has_value());
}

TEST(TuningStore, OneCacheSharedByThreads) {
  Cache cache = Cache::openInMemory(quiet());
  TuningKey key = testKey();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i)
        cache.recordCandidate(key, okCandidate(64, i + 1, t + 1, 1.0 + i));
    });
  for (std::thread &t : threads)
    t.join();
  EXPECT_EQ(cache.candidates(key).size(), 200u);
  EXPECT_TRUE(cache.warnings().empty());
}

TEST(Inspect, ListShowClear) {
  TempDir tmp;
  Cache cache = Cache::open(tmp.file("lina.db"), quiet());
  ASSERT_TRUE(cache.putCubin("aa01", std::string(1234, 'c')));
  ASSERT_TRUE(cache.putCubin("aa02", "x"));
  TuningKey key = testKey();
  ASSERT_TRUE(cache.recordCandidate(key, okCandidate(64, 32, 4, 0.5)));
  Candidate failed;
  failed.status = CandidateStatus::LaunchError;
  failed.error = "CUDA_ERROR_OUT_OF_RESOURCES";
  ASSERT_TRUE(cache.recordCandidate(key, failed));

  std::vector<CacheEntry> entries = cache.listEntries();
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].kind, CacheEntry::Kind::Cubin);
  EXPECT_EQ(entries[0].key, "aa01");
  EXPECT_EQ(entries[0].bytes, 1234);
  EXPECT_EQ(entries[0].shortKey, "aa01");
  const CacheEntry &t = entries[2];
  EXPECT_EQ(t.kind, CacheEntry::Kind::Tuning);
  EXPECT_EQ(t.key, key.digest());
  EXPECT_EQ(t.shortKey, key.digest().substr(0, kShortKeyLength));
  EXPECT_EQ(t.candidates, 2);
  EXPECT_EQ(t.okCandidates, 1);
  EXPECT_EQ(t.bestMs, 0.5);
  EXPECT_EQ(t.gpuName, "NVIDIA H200");
  EXPECT_EQ(t.arch, "sm_90");
  EXPECT_EQ(t.smCount, 132);
  EXPECT_EQ(t.bucket, key.shapeBucket);
  EXPECT_EQ(t.spec, key.spec);
  // The key's fields, two candidates' numbers and the error's text.
  EXPECT_GT(t.bytes, int64_t(key.spec.size() + 2 * 48 +
                             failed.error.size()));
  EXPECT_GE(t.updatedAt, t.createdAt);

  std::string error;
  std::optional<std::string> shown = cache.show(key.digest().substr(0, 12));
  ASSERT_TRUE(shown.has_value());
  EXPECT_NE(shown->find(key.spec), std::string::npos) << *shown;
  EXPECT_NE(shown->find("launch_error"), std::string::npos) << *shown;
  EXPECT_NE(shown->find("CUDA_ERROR_OUT_OF_RESOURCES"), std::string::npos);
  shown = cache.show("aa01");
  ASSERT_TRUE(shown.has_value());
  EXPECT_NE(shown->find("1234 bytes"), std::string::npos) << *shown;
  EXPECT_NE(shown->find("(matches)"), std::string::npos) << *shown;
  EXPECT_FALSE(cache.show("aa", &error).has_value());
  EXPECT_NE(error.find("more than one"), std::string::npos) << error;
  EXPECT_FALSE(cache.show("zz", &error).has_value());
  EXPECT_NE(error.find("no entry"), std::string::npos) << error;

  EXPECT_TRUE(cache.clear());
  EXPECT_TRUE(cache.listEntries().empty());
  EXPECT_FALSE(cache.getCubin("aa01").has_value());
  EXPECT_TRUE(cache.candidates(key).empty());
  // Still usable after clearing.
  EXPECT_TRUE(cache.putCubin("aa03", "y"));
  EXPECT_EQ(cache.listEntries().size(), 1u);
  EXPECT_TRUE(cache.warnings().empty());
}

TEST(Inspect, ListNamesWhatEachEntryIsFor) {
  Cache cache = Cache::openInMemory(quiet());
  ASSERT_TRUE(cache.putCubin("c", "x", {"gdn", "sm_90a"}));
  ASSERT_TRUE(cache.putCubin("d", "y"));
  TuningKey key = testKey();
  key.specName = "kda";
  ASSERT_TRUE(cache.recordCandidate(key, okCandidate(64, 32, 4, 0.5)));
  std::vector<CacheEntry> entries = cache.listEntries();
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].specName, "gdn");
  EXPECT_EQ(entries[0].arch, "sm_90a");
  // Stored without: unknown, as in an older lina's rows.
  EXPECT_EQ(entries[1].specName, "");
  EXPECT_EQ(entries[1].arch, "");
  EXPECT_EQ(entries[2].specName, "kda");
}

TEST(Inspect, ShortKeysAreUniquePrefixes) {
  Cache cache = Cache::openInMemory(quiet());
  for (const char *key : {"abcdef0123456789", "abcdef0199999999",
                          "ffffffffffffffff", "abc"})
    ASSERT_TRUE(cache.putCubin(key, "x"));
  std::map<std::string, std::string> shortKeys;
  for (const CacheEntry &e : cache.listEntries())
    shortKeys[e.key] = e.shortKey;
  EXPECT_EQ(shortKeys["abcdef0123456789"], "abcdef012");
  EXPECT_EQ(shortKeys["abcdef0199999999"], "abcdef019");
  EXPECT_EQ(shortKeys["ffffffffffffffff"], "ffffffff");
  // A key shorter than the prefix is all of itself.
  EXPECT_EQ(shortKeys["abc"], "abc");
}

TEST(Inspect, APrefixFindsItsEntriesAndAWholeKeyOnlyItself) {
  Cache cache = Cache::openInMemory(quiet());
  for (const char *key : {"ab", "abc1", "abc2", "ff"})
    ASSERT_TRUE(cache.putCubin(key, "x", {"gdn", "sm_90a"}));
  TuningKey key = testKey();
  ASSERT_TRUE(cache.recordCandidate(key, okCandidate(64, 32, 4, 0.5)));
  EXPECT_EQ(cache.findEntries("abc").size(), 2u);
  ASSERT_EQ(cache.findEntries("ab").size(), 1u);
  EXPECT_EQ(cache.findEntries("ab")[0].key, "ab");
  EXPECT_TRUE(cache.findEntries("zz").empty());
  EXPECT_TRUE(cache.findEntries("").empty());

  std::string error;
  EXPECT_FALSE(cache.entryDetail("abc", &error).has_value());
  // Each match on a line of its own, by its short key.
  EXPECT_NE(error.find("matches more than one entry (2); give more of the "
                       "key:\n  abc1  cubin   sm_90a (gdn)\n  abc2  cubin   "
                       "sm_90a (gdn)"),
            std::string::npos)
      << error;
  std::optional<CacheEntryDetail> cubin = cache.entryDetail("ff", &error);
  ASSERT_TRUE(cubin.has_value()) << error;
  EXPECT_EQ(cubin->entry.specName, "gdn");
  EXPECT_TRUE(cubin->checksumMatches);
  EXPECT_EQ(cubin->checksum.size(), 64u);
  std::optional<CacheEntryDetail> tuning =
      cache.entryDetail(key.digest().substr(0, 10), &error);
  ASSERT_TRUE(tuning.has_value()) << error;
  EXPECT_EQ(tuning->entry.key, key.digest());
  EXPECT_EQ(tuning->driverVersion, key.driverVersion);
  EXPECT_EQ(tuning->linaVersion, key.linaVersion);
  ASSERT_EQ(tuning->results.size(), 1u);
  EXPECT_EQ(tuning->results[0].timeMs, 0.5);
}

TEST(Remove, EntriesByKeyWithTheirCandidates) {
  TempDir tmp;
  Cache cache = Cache::open(tmp.file("lina.db"), quiet());
  ASSERT_TRUE(cache.putCubin("c1", "x"));
  ASSERT_TRUE(cache.putCubin("c2", "y"));
  TuningKey key = testKey();
  ASSERT_TRUE(cache.recordCandidate(key, okCandidate(64, 32, 4, 0.5)));
  ASSERT_TRUE(cache.recordCandidate(key, okCandidate(32, 32, 4, 0.7)));
  int64_t removed = -1;
  ASSERT_TRUE(cache.removeEntries({"c1", key.digest(), "gone"}, &removed));
  EXPECT_EQ(removed, 2);
  std::vector<CacheEntry> left = cache.listEntries();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].key, "c2");
  EXPECT_TRUE(cache.candidates(key).empty());
  RawDb raw(tmp.file("lina.db"));
  EXPECT_EQ(raw.queryInt("SELECT count(*) FROM candidates"), 0);
  EXPECT_TRUE(cache.warnings().empty());
}

TEST(Remove, OlderThanJudgesATuningByItsNewestCandidate) {
  TempDir tmp;
  std::string path = tmp.file("lina.db");
  Cache cache = Cache::open(path, quiet());
  ASSERT_TRUE(cache.putCubin("old", "x"));
  ASSERT_TRUE(cache.putCubin("new", "y"));
  TuningKey stale = testKey("bh=1..1,t=1..256");
  TuningKey topped = testKey("bh=2..2,t=1..256");
  ASSERT_TRUE(cache.recordCandidate(stale, okCandidate(64, 32, 4, 0.5)));
  ASSERT_TRUE(cache.recordCandidate(topped, okCandidate(64, 32, 4, 0.5)));
  ASSERT_TRUE(cache.recordCandidate(topped, okCandidate(32, 32, 4, 0.5)));
  {
    // Written ten days ago, but for one candidate of `topped` added now.
    RawDb raw(path);
    ASSERT_EQ(raw.exec("UPDATE cubins SET created = created - 864000 WHERE "
                       "key = 'old'; UPDATE tunings SET created = created - "
                       "864000; UPDATE candidates SET created = created - "
                       "864000 WHERE chunk_size = 64"),
              "");
  }
  std::vector<CacheEntry> removed;
  ASSERT_TRUE(cache.removeOlderThan(unixTimeNow() - 86400, &removed));
  ASSERT_EQ(removed.size(), 2u);
  EXPECT_EQ(removed[0].key, "old");
  EXPECT_EQ(removed[1].key, stale.digest());
  std::vector<CacheEntry> left = cache.listEntries();
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(left[0].key, "new");
  EXPECT_EQ(left[1].key, topped.digest());
  EXPECT_EQ(cache.candidates(topped).size(), 2u);
  // Nothing that old is left: nothing more goes.
  ASSERT_TRUE(cache.removeOlderThan(unixTimeNow() - 86400, &removed));
  EXPECT_TRUE(removed.empty());
}

TEST(Inspect, MovedFromCacheIsInert) {
  Cache a = Cache::openInMemory(quiet());
  Cache b = std::move(a);
  EXPECT_TRUE(b.putCubin("k", "v"));
  // A moved-from Cache answers every call without crashing.
  EXPECT_FALSE(a.putCubin("k", "v")); // NOLINT(bugprone-use-after-move)
  EXPECT_FALSE(a.getCubin("k").has_value());
  EXPECT_TRUE(a.listEntries().empty());
  EXPECT_EQ(b.getCubin("k"), std::string("v"));
}

} // namespace
