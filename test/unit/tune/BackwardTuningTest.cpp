//===- BackwardTuningTest.cpp - The backward's schedules in the cache ---===//
//
// Part of lina. What a backward tune records is found by backward kernels of
// the same bucket and by nothing else: its keys and rows cannot be taken
// for the forward's or decode's, nor theirs for its, in one cache; the
// stored schedule round-trips, and rows no backward tune records are
// refused by the lookup and by `lina cache import`.
//
//===----------------------------------------------------------------------===//
#include "TuneTestUtil.h"

#include "lina/Autotune/BackwardTuning.h"
#include "lina/Autotune/DecodeTuning.h"
#include "lina/Autotune/ScheduleKnobs.h"

#include <gtest/gtest.h>

namespace lina {
namespace {

using tunetest::quiet;
using tunetest::testGpu;
using tunetest::testSpec;

/// Short, as the tests name many schedules.
constexpr auto bwd = &tunetest::backwardSchedule;

cache::Candidate ok(const cache::Schedule &s, double ms) {
  cache::Candidate c;
  c.schedule = s;
  c.timeMs = ms;
  return c;
}

TEST(BackwardTuning, CacheScheduleRoundTripsAndRejectsOtherRows) {
  cache::Schedule stored = toCacheSchedule(bwd(32, 64, 8));
  EXPECT_EQ(stored, (cache::Schedule{32, 64, 8, "backward"}));
  std::optional<BackwardScheduleOptions> back =
      backwardFromCacheSchedule(stored);
  ASSERT_TRUE(back);
  EXPECT_TRUE(sameBackwardSchedule(*back, bwd(32, 64, 8)));
  EXPECT_EQ(describe(*back), "C32 tv64 w8");
  // The forward's and decode's rows are not backward schedules.
  EXPECT_FALSE(backwardFromCacheSchedule({32, 64, 8, "materialize"}));
  EXPECT_FALSE(backwardFromCacheSchedule(toCacheSchedule(DecodeSchedule{16, 4})));
  EXPECT_FALSE(backwardFromCacheSchedule({0, 64, 8, "backward"}));
}

TEST(BackwardTuning, TheBarrierWindowRidesOnTheStrategy) {
  BackwardScheduleOptions grouped = bwd(32, 128, 8);
  grouped.barrierWindow = 16;
  cache::Schedule stored = toCacheSchedule(grouped);
  EXPECT_EQ(stored,
            (cache::Schedule{32, 128, 8, "backward+barrier-window=16"}));
  std::optional<BackwardScheduleOptions> back =
      backwardFromCacheSchedule(stored);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->barrierWindow, 16);
  EXPECT_TRUE(sameBackwardSchedule(*back, grouped));
  EXPECT_FALSE(sameBackwardSchedule(*back, bwd(32, 128, 8)));
  EXPECT_EQ(describe(*back), "C32 tv128 w8 bw16");
  EXPECT_EQ(backwardScheduleProblem(stored), "");
  // A row written before the knob existed reads as window 0; a suffix that
  // is no window is no backward schedule.
  EXPECT_EQ(backwardFromCacheSchedule({32, 128, 8, "backward"})->barrierWindow,
            0);
  for (const char *bad :
       {"backward+barrier-window=", "backward+barrier-window=x",
        "backward+barrier-window=0", "backward+barrier-window=-4",
        "backward+barrier-window=99999", "backward+prefetch"})
    EXPECT_FALSE(backwardFromCacheSchedule({32, 128, 8, bad})) << bad;
  // A window the tune does not search is refused by the lookup.
  EXPECT_NE(backwardScheduleProblem({32, 128, 8, "backward+barrier-window=8"}),
            "");
}

TEST(BackwardTuning, KeyIsItsOwnAndKeepsTheBucket) {
  Spec spec = testSpec();
  cache::TuningKey backward =
      makeBackwardTuningKey(spec, testGpu(), "13.0", 4, 2048);
  cache::TuningKey forward = makeTuningKey(spec, testGpu(), "13.0", 4, 2048);
  cache::TuningKey decode =
      makeDecodeTuningKey(spec, testGpu(), "13.0", 4, 2048);
  EXPECT_EQ(backward.spec, "backward " + forward.spec);
  EXPECT_EQ(backward.shapeBucket, forward.shapeBucket);
  EXPECT_NE(backward.digest(), forward.digest());
  EXPECT_NE(backward.digest(), decode.digest());
  // The state flags change the backward's kernels (dh0 out, dht in): part
  // of the exact key, unlike decode's.
  Spec stateful = spec;
  stateful.initialState = !spec.initialState;
  EXPECT_NE(backward.digest(),
            makeBackwardTuningKey(stateful, testGpu(), "13.0", 4, 2048)
                .digest());
}

TEST(BackwardTuning, ForwardAndBackwardResultsNeverMix) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  Spec spec = testSpec();
  ScheduleOptions forward;
  forward.chunkSize = 64;
  forward.tileV = 32;
  forward.warps = 8;
  forward.strategy = Strategy::Split;
  db.recordCandidate(makeTuningKey(spec, testGpu(), "13.0", 4, 2048),
                     ok(toCacheSchedule(forward), 0.5));
  EXPECT_FALSE(lookupTunedBackward(db, spec, testGpu(), "13.0", 4, 2048));

  db.recordCandidate(makeBackwardTuningKey(spec, testGpu(), "13.0", 4, 2048),
                     ok(toCacheSchedule(bwd(32, 32, 4)), 2.0));
  std::optional<TunedBackward> found =
      lookupTunedBackward(db, spec, testGpu(), "13.0", 4, 2048);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->source, TunedSource::Exact);
  EXPECT_TRUE(sameBackwardSchedule(found->schedule, bwd(32, 32, 4)));
  std::optional<TunedChoice> chunk =
      lookupTuned(db, spec, testGpu(), "13.0", 4, 2048);
  ASSERT_TRUE(chunk);
  EXPECT_TRUE(sameSchedule(chunk->schedule, forward));

  // A backward row under a forward key (e.g. a hand-edited file) is not a
  // chunk kernel's schedule, and a forward row under a backward key is not
  // a backward's: both lookups skip them.
  cache::Cache mixed = cache::Cache::openInMemory(quiet());
  mixed.recordCandidate(makeTuningKey(spec, testGpu(), "13.0", 4, 2048),
                        ok(toCacheSchedule(bwd(16, 32, 4)), 0.1));
  mixed.recordCandidate(
      makeBackwardTuningKey(spec, testGpu(), "13.0", 4, 2048),
      ok(toCacheSchedule(forward), 0.1));
  EXPECT_FALSE(lookupTuned(mixed, spec, testGpu(), "13.0", 4, 2048));
  EXPECT_FALSE(lookupTunedBackward(mixed, spec, testGpu(), "13.0", 4, 2048));
}

TEST(BackwardTuning, LookupFallsBackToTheFamilyThenNothing) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  Spec spec = testSpec();
  spec.initialState = spec.finalState = true;
  db.recordCandidate(
      makeBackwardTuningKey(tuningFamily(spec), testGpu(), "13.0", 4, 2048),
      ok(toCacheSchedule(bwd(16, 64, 8)), 3.0));
  std::optional<TunedBackward> found =
      lookupTunedBackward(db, spec, testGpu(), "13.0", 4, 2048);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->source, TunedSource::Family);
  EXPECT_TRUE(sameBackwardSchedule(found->schedule, bwd(16, 64, 8)));
  // Another bucket (more sequences) has nothing.
  EXPECT_FALSE(lookupTunedBackward(db, spec, testGpu(), "13.0", 64, 2048));
}

TEST(BackwardTuning, RowsNoTuneRecordsAreRefused) {
  EXPECT_EQ(storedScheduleProblem(toCacheSchedule(bwd(64, 128, 2))), "");
  EXPECT_EQ(storedScheduleProblem(toCacheSchedule(bwd(7, 32, 4))),
            "backward chunk-size 7 is not one of 16, 32, 64 or 128");
  EXPECT_EQ(storedScheduleProblem(toCacheSchedule(bwd(16, 32, 3))),
            "backward warps 3 is not one of 2, 4, 8 or 16");
  // Such a row never becomes what a backward kernel runs.
  cache::Cache db = cache::Cache::openInMemory(quiet());
  Spec spec = testSpec();
  cache::TuningKey key = makeBackwardTuningKey(spec, testGpu(), "13.0", 1, 64);
  db.recordCandidate(key, ok(toCacheSchedule(bwd(7, 32, 4)), 0.1));
  db.recordCandidate(key, ok(toCacheSchedule(bwd(32, 32, 4)), 0.2));
  std::optional<TunedBackward> found =
      lookupTunedBackward(db, spec, testGpu(), "13.0", 1, 64);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->schedule.chunkSize, 32);
}

TEST(BackwardTuning, ResultsSurviveExportAndImport) {
  tunetest::TempDir dir;
  Spec spec = testSpec();
  cache::TuningKey key = makeBackwardTuningKey(spec, testGpu(), "13.0", 4, 2048);
  {
    cache::Cache db = cache::Cache::open(dir.file("a.db"), quiet());
    db.recordCandidate(key, ok(toCacheSchedule(bwd(32, 64, 4)), 1.5));
    std::string error;
    ASSERT_TRUE(db.exportTo(dir.file("export.db"), &error)) << error;
  }
  cache::Cache other = cache::Cache::open(dir.file("b.db"), quiet());
  std::string error;
  ASSERT_TRUE(other.importFrom(dir.file("export.db"), &error, nullptr,
                               storedScheduleProblem))
      << error;
  std::optional<TunedBackward> found =
      lookupTunedBackward(other, spec, testGpu(), "13.0", 4, 2048);
  ASSERT_TRUE(found);
  EXPECT_TRUE(sameBackwardSchedule(found->schedule, bwd(32, 64, 4)));

  // A file with a backward row no tune records is refused whole.
  {
    cache::Cache bad = cache::Cache::open(dir.file("bad.db"), quiet());
    bad.recordCandidate(key, ok(toCacheSchedule(bwd(7, 64, 4)), 1.0));
    ASSERT_TRUE(bad.exportTo(dir.file("bad-export.db"), &error)) << error;
  }
  EXPECT_FALSE(other.importFrom(dir.file("bad-export.db"), &error, nullptr,
                                storedScheduleProblem));
  EXPECT_NE(error.find("backward chunk-size 7 is not one of"),
            std::string::npos)
      << error;
}

} // namespace
} // namespace lina
