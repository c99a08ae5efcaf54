//===- BackwardTuneSessionTest.cpp - A backward's tune on the stand-in --===//
//
// Part of lina. What `lina tune --backward`, lina_tune with
// LINA_TUNE_BACKWARD and lina.tune(backward=True) share, without a GPU: the
// space with the planner's refusals named, and a tune that records a
// winner where the backward's lookup finds it (and the forward's does
// not). What every kind of tune does (counts, refusals, resuming, an
// unusable cache) is BasicTuneSessionTest.cpp's.
//
//===----------------------------------------------------------------------===//
#include "SessionTestUtil.h"
#include "TuneTestUtil.h"

#include "lina/Autotune/BackwardTuneSession.h"
#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace lina {
namespace {

using tunetest::quiet;

Spec gdn64() { return tunetest::smallPreset("gdn"); }

TuneRequest simulated(cache::Cache &db) {
  return tunetest::simulatedRequest(db, 4);
}

TEST(BackwardTuneSession, SpaceNamesWhyEachPrunedCandidateCannotRun) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  TuneRequest request = simulated(db);
  request.dryRun = true;
  // d128, the widest: the planner refuses what does not fit on chip.
  Spec spec = findPreset("gdn")->spec;
  Expected<BackwardTuneSession> session =
      BackwardTuneSession::open(spec, request);
  ASSERT_TRUE(session.ok()) << session.message();
  const std::vector<BackwardSpaceCandidate> &space = session->space();
  // Chunk sizes, tile-v, warps and barrier windows.
  EXPECT_EQ(space.size(), 4u * 4u * 4u * 2u);
  size_t pruned = 0;
  for (const BackwardSpaceCandidate &c : space) {
    if (c.viable()) {
      EXPECT_GT(c.threads, 0) << describe(c.schedule);
      EXPECT_LE(c.sharedBytes, session->limits().sharedMemoryPerBlockOptin);
      continue;
    }
    ++pruned;
    EXPECT_EQ(c.pruned.find('\n'), std::string::npos) << c.pruned;
  }
  EXPECT_GT(pruned, 0u);
  EXPECT_EQ(session->viable().size(), space.size() - pruned);
  // The default is among the viable, and the key is the backward's.
  EXPECT_TRUE(std::any_of(session->viable().begin(), session->viable().end(),
                          [&](const BackwardScheduleOptions &s) {
                            return sameBackwardSchedule(s, session->start());
                          }));
  EXPECT_EQ(session->key().spec.rfind(kBackwardKeyPrefix, 0), 0u);
  Expected<BackwardTuneOutcome> ran = session->run();
  EXPECT_FALSE(ran.ok());
  EXPECT_NE(ran.message().find("dry run"), std::string::npos);
}

TEST(BackwardTuneSession, SmallDeviceLimitsPruneWithTheLimitNamed) {
  DeviceLimits small;
  small.sharedMemoryPerBlockOptin = 48 * 1024;
  std::vector<BackwardSpaceCandidate> space =
      enumerateBackwardCandidates(findPreset("gdn")->spec, small);
  EXPECT_TRUE(std::any_of(
      space.begin(), space.end(), [](const BackwardSpaceCandidate &c) {
        return c.pruned.find("the device allows 49152") != std::string::npos;
      }));
}

TEST(BackwardTuneSession, SimulatedTuneRecordsAWinnerTheBackwardFinds) {
  tunetest::TempDir dir;
  cache::Cache db = cache::Cache::open(dir.file("lina.db"), quiet());
  TuneRequest request = simulated(db);
  size_t events = 0;
  request.progress = [&](const TuneEvent &e) {
    EXPECT_EQ(e.index, ++events);
    EXPECT_EQ(e.limit, 4u);
  };
  Expected<BackwardTuneSession> session =
      BackwardTuneSession::open(gdn64(), request);
  ASSERT_TRUE(session.ok()) << session.message();
  Expected<BackwardTuneOutcome> out = session->run();
  ASSERT_TRUE(out.ok()) << out.message();
  EXPECT_EQ(out->error, "");
  EXPECT_TRUE(out->saved);
  EXPECT_EQ(out->result.tried, 4u);
  EXPECT_EQ(events, 4u);
  ASSERT_TRUE(out->winner);
  GpuIdentity gpu = session->gpu();
  EXPECT_EQ(gpu.name, "simulated");
  std::optional<TunedBackward> found = lookupTunedBackward(
      db, gdn64(), gpu, session->nvrtcVersion(), 2, 256);
  ASSERT_TRUE(found);
  EXPECT_EQ(toCacheSchedule(found->schedule), out->winner->schedule);
  // A Python call whose flags differ finds the family's copy.
  Spec flags = gdn64();
  flags.qkL2Norm = !flags.qkL2Norm;
  flags.initialState = true;
  found = lookupTunedBackward(db, flags, gpu, session->nvrtcVersion(), 2, 256);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->source, TunedSource::Family);
  // The forward's lookup sees none of it.
  EXPECT_FALSE(lookupTuned(db, gdn64(), gpu, session->nvrtcVersion(), 2, 256));

  // Again, through tuneBackwardKernel from a new connection: everything is
  // read back, nothing tried.
  cache::Cache again = cache::Cache::open(dir.file("lina.db"), quiet());
  request = simulated(again);
  Expected<BackwardTuneOutcome> second = tuneBackwardKernel(gdn64(), request);
  ASSERT_TRUE(second.ok()) << second.message();
  EXPECT_EQ(second->result.tried, 0u);
  EXPECT_EQ(second->result.recorded, out->result.looked);
}

} // namespace
} // namespace lina
