//===- TunedLookupTest.cpp - The runtime finds the tuned winner --------===//
//
// Part of lina. What a tune records under a shape is found for every shape
// of the same bucket on the same GPU, and for nothing else.
//
//===----------------------------------------------------------------------===//
#include "TuneTestUtil.h"

#include "lina/Autotune/ScheduleKnobs.h"

#include <gtest/gtest.h>

namespace lina {
namespace {

using tunetest::quiet;
using tunetest::testGpu;
using tunetest::testSpec;

cache::Candidate ok(ScheduleOptions s, double ms) {
  cache::Candidate c;
  c.schedule = toCacheSchedule(s);
  c.timeMs = ms;
  return c;
}

ScheduleOptions sched(int64_t chunk, int64_t tile, int64_t warps,
                      Strategy strategy = Strategy::FusedScan) {
  ScheduleOptions o;
  o.chunkSize = chunk;
  o.tileV = tile;
  o.warps = warps;
  o.strategy = strategy;
  return o;
}

class TunedLookup : public ::testing::Test {
protected:
  void SetUp() override {
    // A tune at B=1, T=8192, HV=8 (bucket bh=5..8, t=4097..16384).
    cache::TuningKey key =
        makeTuningKey(testSpec(), testGpu(), "13.0", 1, 8192);
    ASSERT_TRUE(db.recordCandidate(key, ok(sched(64, 64, 4), 2.0)));
    ASSERT_TRUE(db.recordCandidate(
        key, ok(sched(32, 32, 8, Strategy::Materialize), 1.5)));
    cache::Candidate broken = ok(sched(16, 16, 2), 0.1);
    broken.status = cache::CandidateStatus::Mismatch;
    ASSERT_TRUE(db.recordCandidate(key, broken));
  }
  cache::Cache db = cache::Cache::openInMemory(quiet());
};

TEST_F(TunedLookup, SameBucketFindsTheFastestOkCandidate) {
  // B*HV = 1*8 and T = 5000 fall in the same bucket as the tune.
  std::optional<ScheduleOptions> s =
      tunedSchedule(db, makeTuningKey(testSpec(), testGpu(), "13.0", 1, 5000));
  ASSERT_TRUE(s);
  // The mismatching candidate was "faster" but may never win.
  EXPECT_TRUE(sameSchedule(*s, sched(32, 32, 8, Strategy::Materialize)));
  // B=1 with HV=8 and T=16384 is still the bucket's upper edge.
  EXPECT_TRUE(tunedSchedule(
      db, makeTuningKey(testSpec(), testGpu(), "13.0", 1, 16384)));
}

TEST_F(TunedLookup, OtherBucketsGpusAndSpecsFindNothing) {
  EXPECT_FALSE(
      tunedSchedule(db, makeTuningKey(testSpec(), testGpu(), "13.0", 8, 1024)));
  EXPECT_FALSE(tunedSchedule(
      db, makeTuningKey(testSpec(), testGpu(), "13.0", 1, 16385)));
  EXPECT_FALSE(
      tunedSchedule(db, makeTuningKey(testSpec(), testGpu(), "13.0", 2, 8192)));
  GpuIdentity h100 = testGpu();
  h100.name = "NVIDIA H100 80GB HBM3";
  EXPECT_FALSE(
      tunedSchedule(db, makeTuningKey(testSpec(), h100, "13.0", 1, 8192)));
  EXPECT_FALSE(
      tunedSchedule(db, makeTuningKey(testSpec(), testGpu(), "12.4", 1, 8192)));
  Spec f32 = testSpec();
  f32.dtype = DType::F32;
  EXPECT_FALSE(
      tunedSchedule(db, makeTuningKey(f32, testGpu(), "13.0", 1, 8192)));
  // The spec's name is not part of it.
  Spec renamed = testSpec();
  renamed.name = "other";
  EXPECT_TRUE(
      tunedSchedule(db, makeTuningKey(renamed, testGpu(), "13.0", 1, 8192)));
}

TEST(TuningFamily, KeepsWhatDecidesTheScheduleAndDropsTheFlags) {
  Spec python = testSpec(); // as a Python call asks: flags differ
  python.qkL2Norm = false;
  python.finalState = true;
  python.initialState = true;
  python.scale = 0.5;
  python.gate = GateSource::Softplus;
  python.beta = BetaSource::Sigmoid;
  python.varlen = true;
  EXPECT_EQ(cache::canonicalSpecText(tuningFamily(python)),
            cache::canonicalSpecText(tuningFamily(testSpec())));
  // The variant, the sizes and the dtype stay apart.
  for (auto change : {+[](Spec &s) { s.decay = DecayKind::PerChannel; },
                      +[](Spec &s) { s.update = UpdateRule::Additive; },
                      +[](Spec &s) { s.keyDim = 64; },
                      +[](Spec &s) { s.valueHeads = 16; },
                      +[](Spec &s) { s.dtype = DType::F32; }}) {
    Spec other = testSpec();
    change(other);
    EXPECT_NE(cache::canonicalSpecText(tuningFamily(other)),
              cache::canonicalSpecText(tuningFamily(testSpec())));
  }
}

TEST_F(TunedLookup, AFamilyResultServesSpecsThatDifferInFlags) {
  Spec python = testSpec();
  python.qkL2Norm = false;
  python.finalState = true;
  // Nothing for the exact spec, nothing for its family yet.
  EXPECT_FALSE(lookupTuned(db, python, testGpu(), "13.0", 1, 8192));
  // What `lina tune` records for the family of the tuned spec.
  ASSERT_TRUE(db.recordCandidate(
      makeTuningKey(tuningFamily(testSpec()), testGpu(), "13.0", 1, 8192),
      ok(sched(16, 32, 8, Strategy::Split), 1.2)));
  std::optional<TunedChoice> found =
      lookupTuned(db, python, testGpu(), "13.0", 1, 8192);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->source, TunedSource::Family);
  EXPECT_TRUE(sameSchedule(found->schedule, sched(16, 32, 8, Strategy::Split)));
  // The exact spec's own tune wins over the family's, though slower.
  found = lookupTuned(db, testSpec(), testGpu(), "13.0", 1, 8192);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->source, TunedSource::Exact);
  EXPECT_TRUE(sameSchedule(found->schedule,
                           sched(32, 32, 8, Strategy::Materialize)));
  // Another bucket: neither.
  EXPECT_FALSE(lookupTuned(db, python, testGpu(), "13.0", 8, 1024));
}

TEST(TunedLookupEmpty, OnlyFailuresMeanNoWinner) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  cache::TuningKey key = makeTuningKey(testSpec(), testGpu(), "13.0", 1, 100);
  cache::Candidate c;
  c.schedule = toCacheSchedule(ScheduleOptions());
  c.status = cache::CandidateStatus::CompileError;
  c.error = "nvrtc";
  ASSERT_TRUE(db.recordCandidate(key, c));
  EXPECT_FALSE(tunedSchedule(db, key));
}

TEST(DriverVersion, AsTheKeysSpellIt) {
  EXPECT_EQ(driverVersionString(13000), "13.0");
  EXPECT_EQ(driverVersionString(12040), "12.4");
}

} // namespace
} // namespace lina
