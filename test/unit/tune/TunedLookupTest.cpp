//===- TunedLookupTest.cpp - The runtime finds the tuned winner --------===//
//
// Part of lina. What a tune records under a shape is found for every shape
// of the same bucket on the same GPU, and for nothing else.
//
//===----------------------------------------------------------------------===//
#include "TuneTestUtil.h"

#include "lina/Autotune/DecodeTuning.h"
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

TEST(StoredSchedule, EveryScheduleATuneRecordsPasses) {
  // The knobs' cross product, as the search space enumerates it, for specs
  // with fewer and more knobs and narrower heads; and the decode space.
  Spec mamba2 = testSpec();
  mamba2.update = UpdateRule::Additive;
  mamba2.beta = BetaSource::None;
  mamba2.qkL2Norm = false;
  Spec narrow = testSpec();
  narrow.keyDim = narrow.valueDim = 32;
  size_t seen = 0;
  for (const Spec &spec : {testSpec(), mamba2, narrow}) {
    std::vector<ScheduleKnob> knobs = scheduleKnobs(spec);
    std::vector<size_t> index(knobs.size(), 0);
    for (size_t k = knobs.size(); k > 0; ++seen) {
      ScheduleOptions s;
      for (size_t i = 0; i < knobs.size(); ++i)
        knobs[i].set(s, knobs[i].values[index[i]]);
      ASSERT_EQ(storedScheduleProblem(toCacheSchedule(s)), "") << describe(s);
      k = knobs.size();
      while (k > 0 && ++index[k - 1] == knobs[k - 1].values.size())
        index[--k] = 0;
    }
    for (const DecodeSchedule &d : decodeScheduleSpace(spec))
      EXPECT_EQ(storedScheduleProblem(toCacheSchedule(d)), "")
          << describe(d);
  }
  EXPECT_GT(seen, 1000u);
}

TEST(StoredSchedule, ImpossibleValuesAreNamed) {
  EXPECT_EQ(storedScheduleProblem({7, 64, 4, "fused"}),
            "chunk-size 7 is not one of 16, 32, 64 or 128");
  EXPECT_EQ(storedScheduleProblem({64, 3, 4, "fused"}),
            "tile-v 3 is not one of 16, 32, 64 or 128");
  EXPECT_EQ(storedScheduleProblem({64, 64, 3, "split"}),
            "warps 3 is not one of 2, 4 or 8");
  EXPECT_EQ(storedScheduleProblem({64, 64, 16, "materialize"}),
            "warps 16 is not one of 2, 4 or 8");
  EXPECT_EQ(storedScheduleProblem({16, 64, 8, "split+segments=3"}),
            "segments 3 is not one of 1, 2, 4, 8 or 16");
  EXPECT_EQ(storedScheduleProblem({1, 5, 2, "decode"}),
            "decode warp columns 5 is not one of 4, 8 or 16");
  EXPECT_EQ(storedScheduleProblem({1, 8, 3, "decode"}),
            "decode warps 3 is not one of 1, 2, 4 or 8");
  EXPECT_EQ(storedScheduleProblem({2, 8, 2, "decode"}),
            "a decode schedule's chunk size is 1, not 2");
}

TEST_F(TunedLookup, RowsNoTuneRecordsAreSkipped) {
  // Faster than the bucket's winner (1.5 ms), each of them, and none a
  // schedule a tune records: an older lina's import let such rows in.
  cache::TuningKey key = makeTuningKey(testSpec(), testGpu(), "13.0", 1, 8192);
  for (cache::Schedule bad : {cache::Schedule{7, 64, 4, "fused"},
                              cache::Schedule{64, 3, 4, "fused"},
                              cache::Schedule{64, 64, 3, "fused"},
                              cache::Schedule{1, 16, 2, "decode"}}) {
    cache::Candidate c;
    c.schedule = bad;
    c.timeMs = 0.01 * bad.tileV;
    ASSERT_TRUE(db.recordCandidate(key, c));
  }
  for (int round = 0; round < 2; ++round) {
    std::optional<ScheduleOptions> s = tunedSchedule(db, key);
    ASSERT_TRUE(s);
    EXPECT_TRUE(sameSchedule(*s, sched(32, 32, 8, Strategy::Materialize)));
  }
  std::vector<std::string> warnings = db.warnings();
  ASSERT_EQ(warnings.size(), 4u) << "one each, not one per lookup";
  EXPECT_NE(warnings[0].find("ignoring candidate chunk=64 tile_v=3 warps=4 "
                             "fused of tuning key " +
                             key.digest().substr(0, 16)),
            std::string::npos)
      << warnings[0];
  EXPECT_NE(warnings[0].find("tile-v 3 is not one of 16, 32, 64 or 128"),
            std::string::npos)
      << warnings[0];
  EXPECT_NE(warnings[1].find("a decode schedule where a chunk kernel's "
                             "belongs"),
            std::string::npos)
      << warnings[1];
}

TEST(DriverVersion, AsTheKeysSpellIt) {
  EXPECT_EQ(driverVersionString(13000), "13.0");
  EXPECT_EQ(driverVersionString(12040), "12.4");
}

} // namespace
} // namespace lina
