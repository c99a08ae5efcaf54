//===- TuneSessionTest.cpp - A whole tune through TuneSession ----------===//
//
// Part of lina. What only the forward's tune does, on the cost model (no
// GPU): the winner recorded where the loader's lookup (lookupTuned, as
// loadKernel calls it) finds it for the shape and for the spec's family,
// and a varlen tune's key. What every kind of tune does (counts, refusals,
// resuming, an unusable cache) is BasicTuneSessionTest.cpp's.
//
//===----------------------------------------------------------------------===//
#include "SessionTestUtil.h"
#include "TuneTestUtil.h"

#include "lina/Autotune/ScheduleKnobs.h"
#include "lina/Autotune/TuneSession.h"
#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace lina {
namespace {

using tunetest::quiet;

Spec kda64() { return tunetest::smallPreset("kda"); }

TuneRequest simulated(cache::Cache &db) {
  return tunetest::simulatedRequest(db, 3);
}

bool isViable(const TuneSession &session, const cache::Schedule &schedule) {
  const std::vector<ScheduleOptions> &viable = session.viable();
  return std::any_of(
      viable.begin(), viable.end(),
      [&](const ScheduleOptions &s) { return toCacheSchedule(s) == schedule; });
}

TEST(TuneSession, SimulatedFastTuneRecordsAWinnerTheLoaderFinds) {
  tunetest::TempDir dir;
  cache::Cache db = cache::Cache::open(dir.file("lina.db"), quiet());
  TuneRequest request = simulated(db);
  size_t events = 0;
  request.progress = [&](const TuneEvent &e) {
    ++events;
    EXPECT_EQ(e.index, events);
    EXPECT_EQ(e.limit, 3u);
  };
  Expected<TuneSession> session = TuneSession::open(kda64(), request);
  ASSERT_TRUE(session.ok()) << session.message();
  EXPECT_EQ(session->gpu().name, "simulated");
  EXPECT_FALSE(session->onDevice());
  ASSERT_FALSE(session->viable().empty());
  EXPECT_LT(session->viable().size(), session->space().size());

  Expected<TuneOutcome> outcome = session->run();
  ASSERT_TRUE(outcome.ok()) << outcome.message();
  EXPECT_EQ(outcome->error, "");
  EXPECT_EQ(outcome->result.looked, 3u);
  EXPECT_EQ(outcome->result.tried, 3u);
  EXPECT_EQ(outcome->result.recorded, 0u);
  EXPECT_EQ(events, 3u);
  EXPECT_EQ(outcome->visited.size(), 3u);
  EXPECT_EQ(outcome->candidates, session->space().size());
  EXPECT_EQ(outcome->pruned,
            session->space().size() - session->viable().size());
  EXPECT_TRUE(outcome->saved);
  EXPECT_EQ(outcome->notSavedReason, "");
  EXPECT_EQ(outcome->cachePath, dir.file("lina.db"));
  ASSERT_TRUE(outcome->winner);
  EXPECT_TRUE(isViable(*session, outcome->winner->schedule));
  ASSERT_TRUE(outcome->winner->timeMs);
  EXPECT_GT(*outcome->winner->timeMs, 0);

  // What a kernel made for this shape on this (simulated) GPU would use: the
  // lookup loadKernel makes, from a second connection as another process
  // would open.
  cache::Cache other = cache::Cache::open(dir.file("lina.db"), quiet());
  std::optional<TunedChoice> tuned =
      lookupTuned(other, kda64(), session->gpu(), session->nvrtcVersion(),
                  request.batch, request.seqLen);
  ASSERT_TRUE(tuned);
  EXPECT_EQ(tuned->source, TunedSource::Exact);
  EXPECT_EQ(toCacheSchedule(tuned->schedule), outcome->winner->schedule);
  // A spec that differs only in flags finds the family's record; another
  // shape bucket finds nothing.
  Spec flags = kda64();
  flags.finalState = !flags.finalState;
  tuned = lookupTuned(other, flags, session->gpu(), session->nvrtcVersion(),
                      request.batch, request.seqLen);
  ASSERT_TRUE(tuned);
  EXPECT_EQ(tuned->source, TunedSource::Family);
  EXPECT_EQ(toCacheSchedule(tuned->schedule), outcome->winner->schedule);
  EXPECT_FALSE(lookupTuned(other, kda64(), session->gpu(),
                           session->nvrtcVersion(), 64, 8192));
}

// A varlen tune is recorded under the varlen spec's key, which varlen
// calls look up first; the family (which sets varlen aside) gets it too.
TEST(TuneSession, AVarlenTuneIsRecordedForVarlenCalls) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  TuneRequest request = simulated(db);
  request.varlen = true;
  Expected<TuneSession> session = TuneSession::open(kda64(), request);
  ASSERT_TRUE(session.ok()) << session.message();
  EXPECT_TRUE(session->spec().varlen);
  Expected<TuneOutcome> outcome = session->run();
  ASSERT_TRUE(outcome.ok()) << outcome.message();
  ASSERT_TRUE(outcome->winner);
  Spec varlen = kda64();
  varlen.varlen = true;
  std::optional<TunedChoice> tuned =
      lookupTuned(db, varlen, session->gpu(), session->nvrtcVersion(),
                  request.batch, request.seqLen);
  ASSERT_TRUE(tuned);
  EXPECT_EQ(tuned->source, TunedSource::Exact);
  EXPECT_EQ(toCacheSchedule(tuned->schedule), outcome->winner->schedule);
  tuned = lookupTuned(db, kda64(), session->gpu(), session->nvrtcVersion(),
                      request.batch, request.seqLen);
  ASSERT_TRUE(tuned);
  EXPECT_EQ(tuned->source, TunedSource::Family);
  // The same as a spec that says varlen itself.
  Expected<TuneSession> bySpec = TuneSession::open(varlen, simulated(db));
  ASSERT_TRUE(bySpec.ok()) << bySpec.message();
  EXPECT_EQ(bySpec->key().digest(), session->key().digest());
}

} // namespace
} // namespace lina
