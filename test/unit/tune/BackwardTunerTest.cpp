//===- BackwardTunerTest.cpp - The backward's search, on a fake timer ---===//
//
// Part of lina. The backward's schedules go through the forward's searches
// (Search.h); this checks that they do so with the backward's knobs and
// stored form: a full sweep records every candidate with its status, a
// stopped tune resumes without trying again what it recorded, and the fast
// mode's descent finds the best of a separable landscape within its budget.
//
//===----------------------------------------------------------------------===//
#include "TuneTestUtil.h"

#include "lina/Autotune/BackwardTuning.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace lina {
namespace {

using tunetest::quiet;
using tunetest::testGpu;
using tunetest::testSpec;

/// Short, as the tests name many schedules.
constexpr auto bwd = &tunetest::backwardSchedule;

size_t indexOf(const BackwardKnob &k, int64_t v) {
  return std::find(k.values.begin(), k.values.end(), v) - k.values.begin();
}

class BackwardTuner : public ::testing::Test {
protected:
  std::vector<BackwardKnob> knobs = backwardScheduleKnobs(testSpec());
  cache::TuningKey key =
      makeBackwardTuningKey(testSpec(), testGpu(), "13.0", 4, 2048);
  std::vector<BackwardScheduleOptions> viable;
  std::vector<BackwardScheduleOptions> tried;

  void SetUp() override {
    // Chunks of 128 do not fit (as the planner refuses most of them).
    for (int64_t c : knobs[0].values)
      for (int64_t t : knobs[1].values)
        for (int64_t w : knobs[2].values)
          if (c != 128)
            viable.push_back(bwd(c, t, w));
  }

  /// Best at C32 tv64 w8, barrier window 0; each knob adds its distance
  /// from there.
  BackwardTuneConfig separable() {
    BackwardTuneConfig c;
    c.trial = [this](const BackwardScheduleOptions &s) {
      tried.push_back(s);
      const int64_t best[] = {32, 64, 8, 0};
      double t = 1;
      for (size_t i = 0; i < knobs.size(); ++i)
        t += (i + 1) * std::abs(double(indexOf(knobs[i], knobs[i].get(s))) -
                                double(indexOf(knobs[i], best[i])));
      cache::Candidate r;
      r.timeMs = t;
      return r;
    };
    return c;
  }
};

TEST_F(BackwardTuner, KnobsAreChunkTileWarpsAndBarrierWindow) {
  ASSERT_EQ(knobs.size(), 4u);
  EXPECT_STREQ(knobs[0].name, "chunk-size");
  EXPECT_EQ(knobs[1].values, (std::vector<int64_t>{16, 32, 64, 128}));
  EXPECT_EQ(knobs[2].values, (std::vector<int64_t>{2, 4, 8, 16}));
  EXPECT_STREQ(knobs[3].name, "barrier-window");
  EXPECT_EQ(knobs[3].values, (std::vector<int64_t>{0, 16}));
  Spec narrow = testSpec();
  narrow.valueDim = 32;
  EXPECT_EQ(backwardScheduleKnobs(narrow)[1].values,
            (std::vector<int64_t>{16, 32}));
}

TEST_F(BackwardTuner, FullRecordsEveryCandidateAsABackwardSchedule) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  BackwardTuneConfig c = separable();
  auto timed = c.trial;
  c.trial = [&](const BackwardScheduleOptions &s) {
    if (s.warps == 2 && s.chunkSize == 64)
      throw std::runtime_error("driver fell over");
    return timed(s);
  };
  BackwardTuneResult r = tuneBackwardFull(db, key, viable, c);
  EXPECT_TRUE(r.finished);
  EXPECT_EQ(r.tried, viable.size());
  ASSERT_TRUE(r.best);
  EXPECT_EQ(r.best->schedule, toCacheSchedule(bwd(32, 64, 8)));
  std::vector<cache::Candidate> all = db.candidates(key);
  ASSERT_EQ(all.size(), viable.size());
  size_t launchErrors = 0;
  for (const cache::Candidate &x : all) {
    EXPECT_EQ(x.schedule.strategy, "backward");
    launchErrors += x.status == cache::CandidateStatus::LaunchError;
  }
  EXPECT_EQ(launchErrors, knobs[1].values.size());
  std::optional<TunedBackward> found =
      lookupTunedBackward(db, testSpec(), testGpu(), "13.0", 4, 2048);
  ASSERT_TRUE(found);
  EXPECT_TRUE(sameBackwardSchedule(found->schedule, bwd(32, 64, 8)));
}

TEST_F(BackwardTuner, AStoppedTuneResumesWithoutRepeatingTrials) {
  tunetest::TempDir dir;
  {
    cache::Cache db = cache::Cache::open(dir.file("lina.db"), quiet());
    BackwardTuneConfig c = separable();
    c.maxNewTrials = 5;
    BackwardTuneResult r = tuneBackwardFull(db, key, viable, c);
    EXPECT_FALSE(r.finished);
    EXPECT_EQ(r.tried, 5u);
  }
  std::vector<BackwardScheduleOptions> first = tried;
  tried.clear();
  // A second connection, as a new process would open.
  cache::Cache db = cache::Cache::open(dir.file("lina.db"), quiet());
  BackwardTuneResult r = tuneBackwardFull(db, key, viable, separable());
  EXPECT_TRUE(r.finished);
  EXPECT_EQ(r.recorded, 5u);
  EXPECT_EQ(r.tried, viable.size() - 5);
  for (const BackwardScheduleOptions &s : tried)
    for (const BackwardScheduleOptions &f : first)
      EXPECT_FALSE(sameBackwardSchedule(s, f)) << describe(s);
}

TEST_F(BackwardTuner, FastFindsTheBestOfASeparableLandscape) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  BackwardTuneResult r = tuneBackwardFast(db, key, knobs, viable,
                                          bwd(16, 32, 4), 12, separable());
  ASSERT_TRUE(r.best);
  EXPECT_EQ(r.best->schedule, toCacheSchedule(bwd(32, 64, 8)));
  EXPECT_LE(r.looked, 12u);
  EXPECT_LT(r.looked, viable.size());
  ASSERT_FALSE(r.path.empty());
  EXPECT_TRUE(sameBackwardSchedule(r.path.front(), bwd(16, 32, 4)));
  // The start not viable (C128): the first viable schedule instead.
  tried.clear();
  cache::Cache other = cache::Cache::openInMemory(quiet());
  r = tuneBackwardFast(other, key, knobs, viable, bwd(128, 32, 4), 12,
                       separable());
  ASSERT_FALSE(tried.empty());
  EXPECT_TRUE(sameBackwardSchedule(tried.front(), viable.front()));
}

} // namespace
} // namespace lina
