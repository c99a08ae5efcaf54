//===- BasicTuneSessionTest.cpp - What every kind of tune shares -------===//
//
// Part of lina. The forward's and the backward's tunes are one session
// template (BasicTuneSession.h); what it does whatever the kernel is
// tested here once, for each kind, on the cost model (no GPU): the request's
// refusals, a dry run, the full sweep's counts and winner, resuming from
// what is recorded, a GPU that is missing and a cache that cannot keep
// what it is given. What only one kind does (the loader's and the
// backward's lookups, the varlen key, the backward's pruning) is in
// TuneSessionTest.cpp and BackwardTuneSessionTest.cpp.
//
//===----------------------------------------------------------------------===//
#include "SessionTestUtil.h"
#include "TuneTestUtil.h"

#include "lina/Autotune/BackwardTuneSession.h"
#include "lina/Autotune/TuneSession.h"
#include "lina/Runtime/Device.h"

#include <gtest/gtest.h>

namespace lina {
namespace {

using tunetest::quiet;
using tunetest::smallPreset;

/// Each kind with a spec it tunes.
struct Forward {
  using Kind = ForwardTune;
  static Spec spec() { return smallPreset("kda"); }
};
struct Backward {
  using Kind = BackwardTune;
  static Spec spec() { return smallPreset("gdn"); }
};

template <typename T> class BasicTuneSessionTest : public testing::Test {
protected:
  using Session = BasicTuneSession<typename T::Kind>;
  using Outcome = typename Session::Outcome;

  static TuneRequest simulated(cache::Cache &db) {
    return tunetest::simulatedRequest(db, 3);
  }
  static Expected<Session> open(const TuneRequest &request,
                                const Spec &spec = T::spec()) {
    return Session::open(spec, request);
  }
  static Expected<Outcome> tune(const TuneRequest &request) {
    Expected<Session> session = open(request);
    if (!session.ok())
      return session.status();
    return session->run();
  }
};

using Kinds = testing::Types<Forward, Backward>;
class KindNames {
public:
  template <typename T> static std::string GetName(int) {
    return std::is_same_v<T, Forward> ? "Forward" : "Backward";
  }
};
TYPED_TEST_SUITE(BasicTuneSessionTest, Kinds, KindNames);

TYPED_TEST(BasicTuneSessionTest, BadRequestsAreArgumentErrors) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  TuneRequest request = this->simulated(db);
  request.batch = 0;
  auto s = this->open(request);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::InvalidArgument);
  EXPECT_EQ(s.message(),
            "a tune needs batch and seq_len of at least 1, got 0 and 256");
  request = this->simulated(db);
  request.seqLen = 0;
  s = this->open(request);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::InvalidArgument);
  request = this->simulated(db);
  request.budget = 0;
  s = this->open(request);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "a fast tune needs a budget of at least 1 candidate");
  request = this->simulated(db);
  request.repeats = 0;
  s = this->open(request);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("at least 1 timed call"), std::string::npos)
      << s.message();
  for (bool heads : {true, false}) {
    Spec bad = TypeParam::spec();
    if (heads)
      bad.valueHeads = 6;
    else
      bad.keyDim = 0;
    s = this->open(this->simulated(db), bad);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), StatusCode::InvalidArgument);
    EXPECT_EQ(s.message().rfind("invalid spec: ", 0), 0u) << s.message();
  }
  EXPECT_TRUE(db.listEntries().empty());
}

TYPED_TEST(BasicTuneSessionTest, ADryRunNeedsNoGpuAndTriesNothing) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  TuneRequest request = this->simulated(db);
  request.simulate = false;
  request.dryRun = true;
  auto session = this->open(request);
  ASSERT_TRUE(session.ok()) << session.message();
  EXPECT_FALSE(session->space().empty());
  EXPECT_FALSE(session->viable().empty());
  auto outcome = session->run();
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.status().code(), StatusCode::InvalidArgument);
  EXPECT_NE(outcome.message().find("dry run"), std::string::npos);
  EXPECT_TRUE(db.listEntries().empty());
}

TYPED_TEST(BasicTuneSessionTest, FullLooksAtEveryViableCandidate) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  TuneRequest request = this->simulated(db);
  request.mode = TuneMode::Full;
  auto session = this->open(request);
  ASSERT_TRUE(session.ok()) << session.message();
  auto outcome = session->run();
  ASSERT_TRUE(outcome.ok()) << outcome.message();
  EXPECT_EQ(outcome->error, "");
  EXPECT_EQ(outcome->result.looked, session->viable().size());
  EXPECT_EQ(outcome->result.tried, session->viable().size());
  EXPECT_EQ(outcome->visited.size(), session->viable().size());
  EXPECT_EQ(outcome->candidates, session->space().size());
  EXPECT_EQ(outcome->pruned,
            session->space().size() - session->viable().size());
  // The full sweep's winner is the fastest of all.
  ASSERT_TRUE(outcome->winner);
  for (const cache::Candidate &c : db.candidates(session->key())) {
    ASSERT_TRUE(c.timeMs);
    EXPECT_LE(*outcome->winner->timeMs, *c.timeMs);
  }
}

TYPED_TEST(BasicTuneSessionTest, ASecondTuneReadsEverythingBack) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  auto first = this->tune(this->simulated(db));
  ASSERT_TRUE(first.ok()) << first.message();
  EXPECT_EQ(first->result.tried, 3u);
  auto again = this->tune(this->simulated(db));
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

TYPED_TEST(BasicTuneSessionTest, WithoutAGpuOnlyTheCostModelTimes) {
  if (cuda::queryDevice(0).ok())
    GTEST_SKIP() << "a GPU is present: the no-driver path cannot be shown";
  cache::Cache db = cache::Cache::openInMemory(quiet());
  TuneRequest request = this->simulated(db);
  request.simulate = false;
  auto outcome = this->tune(request);
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.status().code(), StatusCode::NoDriver);
  EXPECT_NE(outcome.message().find("no CUDA driver found"), std::string::npos)
      << outcome.message();
  EXPECT_TRUE(db.listEntries().empty());
}

// A cache whose directory cannot be used lives in memory: the tune still
// finds its winner, and says that it was not saved, and why.
TYPED_TEST(BasicTuneSessionTest, AnUnusableCacheIsReportedNotSaved) {
  cache::Cache db = cache::Cache::open("/dev/null/x/lina.db", quiet());
  auto outcome = this->tune(this->simulated(db));
  ASSERT_TRUE(outcome.ok()) << outcome.message();
  EXPECT_TRUE(outcome->winner);
  EXPECT_FALSE(outcome->saved);
  EXPECT_NE(outcome->notSavedReason.find("/dev/null/x"), std::string::npos)
      << outcome->notSavedReason;
}

} // namespace
} // namespace lina
