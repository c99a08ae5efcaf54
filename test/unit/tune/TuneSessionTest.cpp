//===- TuneSessionTest.cpp - A whole tune through TuneSession ----------===//
//
// Part of lina. What `lina tune`, lina_tune and lina.tune share, on the cost
// model (no GPU): the outcome's counts, the winner recorded where the
// loader's lookup (lookupTuned, as loadKernel calls it) finds it for the
// shape and for the spec's family, resuming from what is recorded, the
// refusals, and a cache that cannot keep what it is given.
//
//===----------------------------------------------------------------------===//
#include "TuneTestUtil.h"

#include "lina/Autotune/ScheduleKnobs.h"
#include "lina/Autotune/TuneSession.h"
#include "lina/Runtime/Device.h"
#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace lina {
namespace {

using tunetest::quiet;

Spec kda64() {
  Spec s = findPreset("kda")->spec;
  s.keyDim = s.valueDim = 64;
  s.heads = s.valueHeads = 4;
  return s;
}

TuneRequest simulated(cache::Cache &db) {
  TuneRequest r;
  r.batch = 2;
  r.seqLen = 256;
  r.budget = 3;
  r.simulate = true;
  r.cache = &db;
  return r;
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

TEST(TuneSession, ASecondTuneReadsEverythingBack) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  Expected<TuneOutcome> first = tuneChunkKernel(kda64(), simulated(db));
  ASSERT_TRUE(first.ok()) << first.message();
  Expected<TuneOutcome> again = tuneChunkKernel(kda64(), simulated(db));
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_EQ(again->result.tried, 0u);
  EXPECT_EQ(again->result.recorded, first->result.looked);
  for (const TuneVisit &visit : again->visited)
    EXPECT_TRUE(visit.recorded);
  ASSERT_TRUE(again->winner);
  EXPECT_EQ(again->winner->schedule, first->winner->schedule);
  // openInMemory() keeps nothing, by request: nothing is missing.
  EXPECT_TRUE(again->saved);
}

TEST(TuneSession, FullLooksAtEveryViableCandidate) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  TuneRequest request = simulated(db);
  request.mode = TuneMode::Full;
  Expected<TuneSession> session = TuneSession::open(kda64(), request);
  ASSERT_TRUE(session.ok()) << session.message();
  Expected<TuneOutcome> outcome = session->run();
  ASSERT_TRUE(outcome.ok()) << outcome.message();
  EXPECT_EQ(outcome->result.looked, session->viable().size());
  // The full sweep's winner is the fastest of all.
  for (const cache::Candidate &c : db.candidates(session->key())) {
    ASSERT_TRUE(c.timeMs);
    EXPECT_LE(*outcome->winner->timeMs, *c.timeMs);
  }
}

TEST(TuneSession, BadRequestsAreArgumentErrors) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  TuneRequest request = simulated(db);
  request.batch = 0;
  Expected<TuneSession> s = TuneSession::open(kda64(), request);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::InvalidArgument);
  EXPECT_EQ(s.message(),
            "a tune needs batch and seq_len of at least 1, got 0 and 256");
  request = simulated(db);
  request.seqLen = 0;
  s = TuneSession::open(kda64(), request);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::InvalidArgument);
  request = simulated(db);
  request.budget = 0;
  s = TuneSession::open(kda64(), request);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("budget"), std::string::npos) << s.message();
  Spec bad = kda64();
  bad.valueHeads = 6;
  s = TuneSession::open(bad, simulated(db));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::InvalidArgument);
  EXPECT_NE(s.message().find("invalid spec: "), std::string::npos)
      << s.message();
  EXPECT_TRUE(db.listEntries().empty());
}

TEST(TuneSession, ADryRunNeedsNoGpuAndTriesNothing) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  TuneRequest request = simulated(db);
  request.simulate = false;
  request.dryRun = true;
  Expected<TuneSession> session = TuneSession::open(kda64(), request);
  ASSERT_TRUE(session.ok()) << session.message();
  EXPECT_FALSE(session->space().empty());
  Expected<TuneOutcome> outcome = session->run();
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.status().code(), StatusCode::InvalidArgument);
  EXPECT_TRUE(db.listEntries().empty());
}

TEST(TuneSession, WithoutAGpuOnlyTheCostModelTimes) {
  if (cuda::queryDevice(0).ok())
    GTEST_SKIP() << "a GPU is present: the no-driver path cannot be shown";
  cache::Cache db = cache::Cache::openInMemory(quiet());
  TuneRequest request = simulated(db);
  request.simulate = false;
  Expected<TuneOutcome> outcome = tuneChunkKernel(kda64(), request);
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.status().code(), StatusCode::NoDriver);
  EXPECT_NE(outcome.message().find("no CUDA driver found"), std::string::npos)
      << outcome.message();
  EXPECT_TRUE(db.listEntries().empty());
}

// A cache whose directory cannot be used lives in memory: the tune still
// finds its winner, and says that it was not saved, and why.
TEST(TuneSession, AnUnusableCacheIsReportedNotSaved) {
  cache::Cache db = cache::Cache::open("/dev/null/x/lina.db", quiet());
  Expected<TuneOutcome> outcome = tuneChunkKernel(kda64(), simulated(db));
  ASSERT_TRUE(outcome.ok()) << outcome.message();
  EXPECT_TRUE(outcome->winner);
  EXPECT_FALSE(outcome->saved);
  EXPECT_NE(outcome->notSavedReason.find("/dev/null/x"), std::string::npos)
      << outcome->notSavedReason;
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
