//===- TunerTest.cpp - Recording, resuming and the fast mode -----------===//
//
// Part of lina. The tuner runs against fake timers: a separable landscape
// (each knob has a best value, whatever the others), where coordinate
// descent must find the global best, and a trap where it cannot. A tune
// killed with SIGKILL in a child process must resume without trying again
// what it recorded.
//
//===----------------------------------------------------------------------===//
#include "TuneTestUtil.h"

#include "lina/Autotune/Tuner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <iterator>
#include <stdexcept>
#include <sys/wait.h>
#include <unistd.h>

namespace lina {
namespace {

using tunetest::quiet;
using tunetest::TempDir;
using tunetest::testGpu;
using tunetest::testSpec;

std::vector<ScheduleOptions>
allSchedules(const std::vector<ScheduleKnob> &knobs) {
  std::vector<ScheduleOptions> out(1);
  for (const ScheduleKnob &k : knobs) {
    std::vector<ScheduleOptions> next;
    for (const ScheduleOptions &s : out)
      for (int64_t v : k.values) {
        ScheduleOptions n = s;
        k.set(n, v);
        next.push_back(n);
      }
    out = next;
  }
  return out;
}

size_t indexOf(const ScheduleKnob &k, int64_t v) {
  return std::find(k.values.begin(), k.values.end(), v) - k.values.begin();
}

/// Best at materialize, chunk 32, tile-v 32, warps 8, no prefetch, no
/// warpgroup (testSpec, gdn on an sm_90 GPU, has the warpgroup knob); each knob
/// adds its distance from there.
double separable(const std::vector<ScheduleKnob> &knobs,
                 const ScheduleOptions &s) {
  const int64_t best[] = {1, 32, 32, 8, 0, 0};
  EXPECT_EQ(knobs.size(), std::size(best));
  double t = 1;
  for (size_t i = 0; i < knobs.size(); ++i)
    t += (i + 1) * std::abs(double(indexOf(knobs[i], knobs[i].get(s))) -
                            double(indexOf(knobs[i], best[i])));
  return t;
}

ScheduleOptions sched(int64_t chunk, int64_t tile, int64_t warps,
                      Strategy strategy) {
  ScheduleOptions o;
  o.chunkSize = chunk;
  o.tileV = tile;
  o.warps = warps;
  o.strategy = strategy;
  return o;
}

class Tuner : public ::testing::Test {
protected:
  std::vector<ScheduleKnob> knobs = scheduleKnobs(testSpec());
  std::vector<ScheduleOptions> viable = allSchedules(knobs);
  cache::TuningKey key = makeTuningKey(testSpec(), testGpu(), "13.0", 1, 8192);
  ScheduleOptions start = sched(64, 64, 4, Strategy::FusedScan);
  std::vector<ScheduleOptions> tried;

  TuneConfig timer(double (*f)(const std::vector<ScheduleKnob> &,
                               const ScheduleOptions &)) {
    TuneConfig c;
    c.trial = [this, f](const ScheduleOptions &s) {
      tried.push_back(s);
      cache::Candidate r;
      r.timeMs = f(knobs, s);
      return r;
    };
    return c;
  }
};

TEST_F(Tuner, FullRecordsEveryCandidateWithItsStatus) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  TuneConfig c = timer(separable);
  TrialFn timed = c.trial;
  c.trial = [&](const ScheduleOptions &s) {
    if (s.warps == 2 && s.chunkSize == 16) {
      tried.push_back(s);
      cache::Candidate f;
      f.status = cache::CandidateStatus::CompileError;
      f.error = "nvrtc: too many resources";
      return f;
    }
    if (s.warps == 2 && s.chunkSize == 128) {
      tried.push_back(s);
      throw std::runtime_error("driver fell over");
    }
    return timed(s);
  };
  size_t events = 0;
  c.progress = [&](const TuneEvent &e) {
    ++events;
    EXPECT_EQ(e.index, events);
    EXPECT_EQ(e.limit, viable.size());
  };
  TuneResult r = tuneFull(db, key, viable, c);
  EXPECT_TRUE(r.finished);
  EXPECT_EQ(r.looked, viable.size());
  EXPECT_EQ(r.tried, viable.size());
  EXPECT_EQ(events, viable.size());
  ASSERT_TRUE(r.best);
  EXPECT_EQ(*r.best->timeMs, 1.0);
  EXPECT_TRUE(sameSchedule(fromCacheSchedule(r.best->schedule),
                           sched(32, 32, 8, Strategy::Materialize)));
  std::vector<cache::Candidate> all = db.candidates(key);
  ASSERT_EQ(all.size(), viable.size());
  size_t compileErrors = 0, launchErrors = 0;
  for (const cache::Candidate &x : all) {
    if (x.status == cache::CandidateStatus::CompileError)
      ++compileErrors;
    if (x.status == cache::CandidateStatus::LaunchError) {
      ++launchErrors;
      EXPECT_NE(x.error.find("driver fell over"), std::string::npos);
    }
  }
  // 3 strategies x 4 tile-v x 2 prefetch x 2 wgmma
  EXPECT_EQ(compileErrors, 48u);
  EXPECT_EQ(launchErrors, 48u);
}

TEST_F(Tuner, StoppedTuneResumesWithoutRepeatingAnything) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  TuneConfig c = timer(separable);
  c.maxNewTrials = 10;
  TuneResult first = tuneFull(db, key, viable, c);
  EXPECT_FALSE(first.finished);
  EXPECT_EQ(first.tried, 10u);
  EXPECT_EQ(db.candidates(key).size(), 10u);
  std::vector<ScheduleOptions> before = tried;
  tried.clear();
  c.maxNewTrials = 0;
  TuneResult second = tuneFull(db, key, viable, c);
  EXPECT_TRUE(second.finished);
  EXPECT_EQ(second.recorded, 10u);
  EXPECT_EQ(second.tried, viable.size() - 10);
  for (const ScheduleOptions &s : tried)
    for (const ScheduleOptions &b : before)
      EXPECT_FALSE(sameSchedule(s, b)) << "tried twice: chunk " << s.chunkSize;
  EXPECT_EQ(db.candidates(key).size(), viable.size());
}

// A tune resumed over rows an older lina wrote ("+wgmma") reads them as
// the warpgroup schedules they are: none is tried again, and no second row
// is written beside it.
TEST_F(Tuner, ResumedTuneTakesOldWgmmaRowsAsRecorded) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  size_t old = 0;
  for (const ScheduleOptions &s : viable) {
    if (!s.warpgroup)
      continue;
    cache::Candidate c;
    c.schedule = toCacheSchedule(s);
    std::string &text = c.schedule.strategy;
    size_t at = text.find("+warpgroup");
    ASSERT_NE(at, std::string::npos) << text;
    text.replace(at, std::string("+warpgroup").size(), "+wgmma");
    c.status = cache::CandidateStatus::Ok;
    c.timeMs = 0.5;
    db.recordCandidate(key, c);
    ++old;
  }
  ASSERT_GT(old, 0u);
  TuneResult r = tuneFull(db, key, viable, timer(separable));
  EXPECT_TRUE(r.finished);
  EXPECT_EQ(r.recorded, old);
  EXPECT_EQ(r.tried, viable.size() - old);
  for (const ScheduleOptions &s : tried)
    EXPECT_FALSE(s.warpgroup) << "tried again: " << describe(s);
  EXPECT_EQ(db.candidates(key).size(), viable.size());
  ASSERT_TRUE(r.best);
  EXPECT_EQ(*r.best->timeMs, 0.5);
}

TEST_F(Tuner, StopHookEndsTheRunAfterRecordingTheCandidate) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  TuneConfig c = timer(separable);
  TrialFn timed = c.trial;
  bool broken = false;
  // The sixth candidate breaks the "context": it is recorded as a launch
  // error and nothing runs after it.
  c.trial = [&](const ScheduleOptions &s) {
    if (tried.size() == 5) {
      tried.push_back(s);
      broken = true;
      cache::Candidate f;
      f.status = cache::CandidateStatus::LaunchError;
      f.error = "illegal address";
      return f;
    }
    return timed(s);
  };
  c.stop = [&] { return broken; };
  TuneResult r = tuneFull(db, key, viable, c);
  EXPECT_FALSE(r.finished);
  EXPECT_EQ(r.tried, 6u);
  EXPECT_EQ(tried.size(), 6u);
  std::vector<cache::Candidate> all = db.candidates(key);
  ASSERT_EQ(all.size(), 6u);
  EXPECT_EQ(all.back().status, cache::CandidateStatus::LaunchError);
  // Fast mode stops the same way.
  cache::Cache db2 = cache::Cache::openInMemory(quiet());
  tried.clear();
  broken = false;
  TuneResult f = tuneFast(db2, key, knobs, viable, start, 20, c);
  EXPECT_FALSE(f.finished);
  EXPECT_EQ(tried.size(), 6u);
  // The next process resumes after it.
  tried.clear();
  TuneResult again = tuneFull(db, key, viable, timer(separable));
  EXPECT_EQ(again.recorded, 6u);
  EXPECT_EQ(again.tried, viable.size() - 6);
}

TEST_F(Tuner, KilledTuneKeepsWhatItRecorded) {
  TempDir dir;
  std::string path = dir.file("lina.db");
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child opens its own connection (never share one across fork).
    cache::Cache db = cache::Cache::open(path, quiet());
    int calls = 0;
    TuneConfig c;
    c.trial = [&](const ScheduleOptions &s) {
      if (++calls == 4)
        raise(SIGKILL); // mid-candidate, as a user's Ctrl-\ or the OOM killer
      cache::Candidate r;
      r.timeMs = separable(knobs, s);
      return r;
    };
    tuneFull(db, key, viable, c);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  cache::Cache db = cache::Cache::open(path, quiet());
  // Three finished, and the fourth marked as in flight.
  std::vector<cache::Candidate> after = db.candidates(key);
  ASSERT_EQ(after.size(), 4u);
  size_t ok = 0;
  for (const cache::Candidate &c : after)
    ok += c.status == cache::CandidateStatus::Ok;
  EXPECT_EQ(ok, 3u);
  TuneResult r = tuneFull(db, key, viable, timer(separable));
  EXPECT_EQ(r.recorded, 3u);
  EXPECT_EQ(r.tried, viable.size() - 3);
  // The three recorded are the first three of the order, not tried again;
  // the one in flight when it died is tried once more.
  for (size_t i = 0; i < 3; ++i)
    for (const ScheduleOptions &s : tried)
      EXPECT_FALSE(sameSchedule(s, viable[i]));
  EXPECT_TRUE(sameSchedule(tried.front(), viable[3]));
  EXPECT_EQ(db.candidates(key).size(), viable.size());
  EXPECT_TRUE(r.finished);
}

TEST_F(Tuner, ACandidateThatKillsTheTuneTwiceIsSkipped) {
  TempDir dir;
  std::string path = dir.file("lina.db");
  // The third candidate "hangs" (is killed) every time it runs.
  auto runChild = [&] {
    pid_t child = fork();
    if (child == 0) {
      cache::Cache db = cache::Cache::open(path, quiet());
      TuneConfig c;
      c.trial = [&](const ScheduleOptions &s) {
        if (sameSchedule(s, viable[2]))
          raise(SIGKILL);
        cache::Candidate r;
        r.timeMs = separable(knobs, s);
        return r;
      };
      tuneFull(db, key, viable, c);
      _exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  };
  ASSERT_TRUE(runChild());
  ASSERT_TRUE(runChild()); // tried once more, killed again
  cache::Cache db = cache::Cache::open(path, quiet());
  TuneResult r = tuneFull(db, key, viable, timer(separable));
  EXPECT_TRUE(r.finished);
  for (const ScheduleOptions &s : tried)
    EXPECT_FALSE(sameSchedule(s, viable[2])) << "the hanging candidate ran";
  for (const cache::Candidate &c : db.candidates(key))
    if (c.schedule == toCacheSchedule(viable[2])) {
      EXPECT_EQ(c.status, cache::CandidateStatus::Timeout);
      EXPECT_NE(c.error.find("not tried again"), std::string::npos);
    }
  EXPECT_EQ(db.candidates(key).size(), viable.size());
}

TEST_F(Tuner, FastFindsTheSeparableOptimumWithinItsBudget) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  size_t prepared = 0;
  TuneConfig c = timer(separable);
  c.prepare = [&](const std::vector<ScheduleOptions> &batch) {
    prepared += batch.size();
  };
  TuneResult r = tuneFast(db, key, knobs, viable, start, 20, c);
  ASSERT_TRUE(r.best);
  EXPECT_TRUE(sameSchedule(fromCacheSchedule(r.best->schedule),
                           sched(32, 32, 8, Strategy::Materialize)));
  EXPECT_LE(r.looked, 20u);
  EXPECT_LT(r.looked, viable.size() / 4);
  EXPECT_EQ(r.tried, tried.size());
  // Batches are handed to prepare() before their trials (parallel builds);
  // the start is tried on its own.
  EXPECT_EQ(prepared + 1, r.tried);
  ASSERT_FALSE(r.path.empty());
  EXPECT_TRUE(sameSchedule(r.path.front(), start));
  EXPECT_TRUE(
      sameSchedule(r.path.back(), sched(32, 32, 8, Strategy::Materialize)));
}

TEST_F(Tuner, FastRespectsATightBudget) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  TuneResult r = tuneFast(db, key, knobs, viable, start, 3, timer(separable));
  EXPECT_EQ(r.looked, 3u);
  EXPECT_EQ(tried.size(), 3u);
  EXPECT_TRUE(sameSchedule(tried.front(), start));
}

TEST_F(Tuner, FastStartsElsewhereWhenTheDefaultIsNotViableOrFails) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  std::vector<ScheduleOptions> some;
  for (const ScheduleOptions &s : viable)
    if (!sameSchedule(s, start))
      some.push_back(s);
  TuneConfig c = timer(separable);
  TrialFn timed = c.trial;
  // The first viable schedule fails to compile: fast moves on to the next.
  c.trial = [&](const ScheduleOptions &s) {
    if (sameSchedule(s, some.front())) {
      tried.push_back(s);
      cache::Candidate f;
      f.status = cache::CandidateStatus::CompileError;
      return f;
    }
    return timed(s);
  };
  TuneResult r = tuneFast(db, key, knobs, some, start, 30, c);
  ASSERT_GE(tried.size(), 2u);
  EXPECT_TRUE(sameSchedule(tried[0], some[0]));
  EXPECT_TRUE(sameSchedule(tried[1], some[1]));
  ASSERT_TRUE(r.best);
  EXPECT_EQ(*r.best->timeMs, 1.0);
}

// From the wgmma scan's one layout no single knob leads to a viable
// schedule (here: wgmma is viable at that layout only, as gdn's fused
// mma.sync scan at C64 tv128 is not), so the descent walks from its
// mma.sync counterpart (withoutWarpgroup) and still finds the separable
// optimum, which beats the wgmma start.
TEST_F(Tuner, FastFromTheWgmmaScanWalksFromItsCounterpart) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  ScheduleOptions scan = withWarpgroup(start);
  std::vector<ScheduleOptions> some;
  for (const ScheduleOptions &s : viable)
    if (!s.warpgroup || sameSchedule(s, scan))
      some.push_back(s);
  auto time = [](const std::vector<ScheduleKnob> &k, const ScheduleOptions &s) {
    return s.warpgroup ? 1.5 : separable(k, s);
  };
  TuneResult r = tuneFast(db, key, knobs, some, scan, 40, timer(time));
  ASSERT_GE(tried.size(), 2u);
  EXPECT_TRUE(sameSchedule(tried[0], scan));
  EXPECT_TRUE(sameSchedule(tried[1], withoutWarpgroup(scan)));
  ASSERT_TRUE(r.best);
  EXPECT_EQ(*r.best->timeMs, 1.0);
  // Where the counterpart's walk finds nothing faster, the scan stays best.
  cache::Cache other = cache::Cache::openInMemory(quiet());
  auto slow = [](const std::vector<ScheduleKnob> &k, const ScheduleOptions &s) {
    return s.warpgroup ? 0.5 : separable(k, s);
  };
  TuneResult kept = tuneFast(other, key, knobs, some, scan, 40, timer(slow));
  ASSERT_TRUE(kept.best);
  EXPECT_EQ(*kept.best->timeMs, 0.5);
  EXPECT_GT(kept.looked, 2u);
}

TEST_F(Tuner, FastAfterFullTriesNothingAndComparesExactly) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  EXPECT_FALSE(compareFastToFull(db, key, knobs, viable, start, 12));
  tuneFull(db, key, viable, timer(separable));
  tried.clear();
  TuneResult fast =
      tuneFast(db, key, knobs, viable, start, 12, timer(separable));
  EXPECT_EQ(fast.tried, 0u);
  EXPECT_TRUE(tried.empty());
  std::optional<FastVsFull> cmp =
      compareFastToFull(db, key, knobs, viable, start, 12);
  ASSERT_TRUE(cmp);
  EXPECT_EQ(cmp->viable, viable.size());
  EXPECT_EQ(cmp->fastLooked, fast.looked);
  EXPECT_DOUBLE_EQ(cmp->ratio, *fast.best->timeMs / 1.0);
}

/// Fastest far from the start in two knobs at once, every single-knob move
/// from the start slower: coordinate descent stays at the start.
double trap(const std::vector<ScheduleKnob> &, const ScheduleOptions &s) {
  if (s.chunkSize == 16 && s.tileV == 16)
    return 0.5;
  if (s.chunkSize == 64 && s.tileV == 64 && s.warps == 4 &&
      s.strategy == Strategy::FusedScan)
    return 2;
  return 3;
}

TEST_F(Tuner, CompareShowsWhatFastMisses) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  tuneFull(db, key, viable, timer(trap));
  std::optional<FastVsFull> cmp =
      compareFastToFull(db, key, knobs, viable, start, 12);
  ASSERT_TRUE(cmp);
  EXPECT_TRUE(sameSchedule(fromCacheSchedule(cmp->fast.schedule), start));
  EXPECT_DOUBLE_EQ(cmp->ratio, 4.0);
}

TEST_F(Tuner, ReplayNeverTries) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  TuneConfig c = timer(separable);
  c.recordedOnly = true;
  TuneResult r = tuneFull(db, key, viable, c);
  EXPECT_FALSE(r.finished);
  EXPECT_TRUE(tried.empty());
  EXPECT_TRUE(db.candidates(key).empty());
}

TEST(ScheduleKnobs, PrefetchSurvivesTheCacheAndOldRowsReadAsOff) {
  ScheduleOptions s = sched(16, 32, 8, Strategy::Split);
  s.prefetch = true;
  cache::Schedule stored = toCacheSchedule(s);
  EXPECT_EQ(stored.strategy, "split+prefetch");
  EXPECT_TRUE(sameSchedule(fromCacheSchedule(stored), s));
  EXPECT_EQ(describe(s), "C16 tv32 w8 split prefetch");
  // A row written before the knob existed.
  stored.strategy = "split";
  ScheduleOptions old = fromCacheSchedule(stored);
  EXPECT_FALSE(old.prefetch);
  EXPECT_EQ(old.strategy, Strategy::Split);
  // The suffix only counts at the end.
  stored.strategy = "split+prefetchx";
  EXPECT_FALSE(fromCacheSchedule(stored).prefetch);
}

TEST(ScheduleKnobs, FlagsSurviveTheCacheAndTellSchedulesApart) {
  ScheduleOptions s = sched(64, 64, 8, Strategy::Split);
  s.prefetch = true;
  s.directDecay = true;
  ScheduleOptions plain = s;
  plain.directDecay = false;
  EXPECT_FALSE(sameSchedule(s, plain));
  cache::Schedule stored = toCacheSchedule(s);
  EXPECT_EQ(stored.strategy, "split+prefetch+direct-decay");
  ScheduleOptions back = fromCacheSchedule(stored);
  EXPECT_TRUE(back.directDecay);
  EXPECT_TRUE(back.prefetch);
  EXPECT_FALSE(back.sharedState);
  EXPECT_TRUE(sameSchedule(back, s));
  s.sharedState = true;
  EXPECT_TRUE(fromCacheSchedule(toCacheSchedule(s)).sharedState);
  s.twoCTAs = true;
  EXPECT_EQ(toCacheSchedule(s).strategy,
            "split+prefetch+shared-state+direct-decay+two-ctas");
  EXPECT_TRUE(fromCacheSchedule(toCacheSchedule(s)).twoCTAs);
  EXPECT_FALSE(sameSchedule(s, back));
  // A suffix from a newer lina is left off; the rest still reads.
  stored.strategy = "materialize+warp-specialized+prefetch";
  back = fromCacheSchedule(stored);
  EXPECT_EQ(back.strategy, Strategy::Materialize);
  EXPECT_TRUE(back.prefetch);
}

TEST(ScheduleKnobs, SegmentsSurviveTheCacheWithTheirCount) {
  ScheduleOptions s = sched(16, 128, 8, Strategy::Split);
  s.prefetch = true;
  s.segments = 8;
  cache::Schedule stored = toCacheSchedule(s);
  EXPECT_EQ(stored.strategy, "split+prefetch+segments=8");
  EXPECT_EQ(describe(s), "C16 tv128 w8 split prefetch segments 8");
  ScheduleOptions back = fromCacheSchedule(stored);
  EXPECT_EQ(back.segments, 8);
  EXPECT_TRUE(back.prefetch);
  EXPECT_TRUE(sameSchedule(back, s));
  ScheduleOptions one = s;
  one.segments = 1;
  EXPECT_FALSE(sameSchedule(one, s));
  EXPECT_EQ(toCacheSchedule(one).strategy, "split+prefetch");
  EXPECT_EQ(fromCacheSchedule(toCacheSchedule(one)).segments, 1);
}

// The warpgroup flag rides on the strategy as "+warpgroup"; rows written
// while it was named "wgmma" ("fused+prefetch+wgmma") read as the same
// schedule, so caches tuned then keep their winners.
TEST(ScheduleKnobs, WarpgroupSurvivesTheCacheAndOldWgmmaRowsReadAsIt) {
  ScheduleOptions s = withWarpgroup(ScheduleOptions());
  cache::Schedule stored = toCacheSchedule(s);
  EXPECT_EQ(stored.strategy, "fused+prefetch+warpgroup");
  EXPECT_EQ(describe(s), "C64 tv128 w8 fused prefetch warpgroup");
  EXPECT_TRUE(sameSchedule(fromCacheSchedule(stored), s));
  cache::Schedule old = stored;
  old.strategy = "fused+prefetch+wgmma";
  ScheduleOptions back = fromCacheSchedule(old);
  EXPECT_TRUE(back.warpgroup);
  EXPECT_TRUE(sameSchedule(back, s));
  EXPECT_EQ(toCacheSchedule(back), stored);
  // With segments after it, as they were written.
  s.segments = 4;
  old.strategy = "fused+prefetch+wgmma+segments=4";
  EXPECT_TRUE(sameSchedule(fromCacheSchedule(old), s));
  EXPECT_EQ(toCacheSchedule(s).strategy, "fused+prefetch+warpgroup+segments=4");
  // Without the flag, the mma.sync schedule.
  old.strategy = "fused+prefetch";
  EXPECT_FALSE(fromCacheSchedule(old).warpgroup);
}

} // namespace
} // namespace lina
