//===- DecodeTuningTest.cpp - Decode schedules tuned by batch ----------===//
//
// Part of lina. What `lina tune --decode` records for a batch is what a
// decode kernel with an open schedule gets for every batch of the same
// bucket, and nothing else: not for other buckets, not for the chunk
// kernels of the same spec. Rows that are not decode schedules are never
// read as one.
//
//===----------------------------------------------------------------------===//
#include "TuneTestUtil.h"

#include "lina/Autotune/DecodeTuning.h"

#include <gtest/gtest.h>

namespace lina {
namespace {

using tunetest::quiet;
using tunetest::testGpu;
using tunetest::testSpec;

cache::Candidate ok(DecodeSchedule s, double ms) {
  cache::Candidate c;
  c.schedule = toCacheSchedule(s);
  c.timeMs = ms;
  return c;
}

TEST(DecodeTuning, CacheScheduleRoundTripsAndRejectsChunkRows) {
  DecodeSchedule s{16, 2};
  cache::Schedule stored = toCacheSchedule(s);
  EXPECT_EQ(stored.chunkSize, 1);
  EXPECT_EQ(stored.strategy, "decode");
  std::optional<DecodeSchedule> back = decodeFromCacheSchedule(stored);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->warpColumns, 16);
  EXPECT_EQ(back->warps, 2);
  EXPECT_EQ(describe(s), "w16 x2");
  EXPECT_FALSE(decodeFromCacheSchedule({32, 32, 8, "split"}));
  EXPECT_FALSE(decodeFromCacheSchedule({1, 0, 4, "decode"}));
}

TEST(DecodeTuning, KeyIsItsOwnAndIgnoresStateFlags) {
  Spec spec = testSpec();
  cache::TuningKey decode = makeDecodeTuningKey(spec, testGpu(), "13.0", 32, 1);
  cache::TuningKey chunk = makeTuningKey(spec, testGpu(), "13.0", 32, 1);
  EXPECT_NE(decode.digest(), chunk.digest());
  EXPECT_EQ(decode.shapeBucket, chunk.shapeBucket);
  Spec stateless = spec;
  stateless.initialState = !spec.initialState;
  stateless.finalState = !spec.finalState;
  EXPECT_EQ(decode.digest(),
            makeDecodeTuningKey(stateless, testGpu(), "13.0", 32, 1).digest());
}

TEST(DecodeTuning, LookupFindsTheBucketsFastestOnly) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  Spec spec = testSpec(); // 8 value heads: batch 32 is bh=256
  cache::TuningKey key = makeDecodeTuningKey(spec, testGpu(), "13.0", 32, 1);
  ASSERT_TRUE(db.recordCandidate(key, ok({8, 4}, 0.050)));
  ASSERT_TRUE(db.recordCandidate(key, ok({16, 2}, 0.040)));
  cache::Candidate failed = ok({4, 1}, 0.001);
  failed.status = cache::CandidateStatus::Mismatch;
  failed.timeMs.reset();
  ASSERT_TRUE(db.recordCandidate(key, failed));

  std::optional<DecodeSchedule> found =
      lookupTunedDecode(db, spec, testGpu(), "13.0", 30, 1);
  ASSERT_TRUE(found) << "batch 30 shares batch 32's bucket";
  EXPECT_EQ(found->warpColumns, 16);
  EXPECT_EQ(found->warps, 2);
  EXPECT_FALSE(lookupTunedDecode(db, spec, testGpu(), "13.0", 1, 1));
  EXPECT_FALSE(lookupTunedDecode(db, spec, testGpu(), "12.8", 32, 1));
  // A chunk kernel of the same spec and shape finds nothing of it.
  EXPECT_FALSE(db.best(makeTuningKey(spec, testGpu(), "13.0", 32, 1)));
}

TEST(DecodeTuning, LookupSkipsRowsNoTuneRecords) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  Spec spec = testSpec();
  cache::TuningKey key = makeDecodeTuningKey(spec, testGpu(), "13.0", 32, 1);
  ASSERT_TRUE(db.recordCandidate(key, ok({8, 4}, 0.050)));
  // Three warps and five warp columns: faster, and no tune records them.
  ASSERT_TRUE(db.recordCandidate(key, ok({8, 3}, 0.010)));
  ASSERT_TRUE(db.recordCandidate(key, ok({5, 2}, 0.020)));
  std::optional<DecodeSchedule> found =
      lookupTunedDecode(db, spec, testGpu(), "13.0", 32, 1);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->warpColumns, 8);
  EXPECT_EQ(found->warps, 4);
  ASSERT_EQ(db.warnings().size(), 2u);
  EXPECT_NE(db.warnings()[0].find("decode warps 3 is not one of 1, 2, 4 or 8"),
            std::string::npos)
      << db.warnings()[0];
}

TEST(DecodeTuning, LookupFallsBackToTheFamily) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  Spec tuned = testSpec();
  tuned.qkL2Norm = false;
  ASSERT_TRUE(db.recordCandidate(
      makeDecodeTuningKey(tuningFamily(tuned), testGpu(), "13.0", 32, 1),
      ok({4, 8}, 0.05)));
  Spec call = testSpec(); // l2norm in the kernel: its own key has nothing
  std::optional<DecodeSchedule> found =
      lookupTunedDecode(db, call, testGpu(), "13.0", 32, 1);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->warpColumns, 4);
  EXPECT_EQ(found->warps, 8);
}

TEST(DecodeTuning, ChooserLooksUpEachBucketOnce) {
  cache::Cache db = cache::Cache::openInMemory(quiet());
  Spec spec = testSpec();
  cache::TuningKey key = makeDecodeTuningKey(spec, testGpu(), "13.0", 32, 1);
  ASSERT_TRUE(db.recordCandidate(key, ok({8, 4}, 0.050)));
  DecodeScheduleChooser choose =
      tunedDecodeChooser(&db, spec, testGpu(), "13.0");
  ASSERT_TRUE(choose);
  std::optional<DecodeSchedule> first = choose(32, 1);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->warpColumns, 8);
  EXPECT_FALSE(choose(1, 1));
  // Remembered: a faster row recorded later is not seen by this kernel
  // (a process picks its schedules up at first use, as chunk kernels do).
  ASSERT_TRUE(db.recordCandidate(key, ok({16, 8}, 0.010)));
  EXPECT_EQ(choose(31, 1)->warpColumns, 8);
  EXPECT_FALSE(tunedDecodeChooser(nullptr, spec, testGpu(), "13.0"));
}

TEST(DecodeTuning, SimulatedTimesFavourWideWarpsOnlyWhenTheGpuIsFull) {
  Spec spec = testSpec();
  spec.heads = spec.valueHeads = 32;
  auto us = [&](int64_t batch, int64_t width) {
    return simulatedDecodeMicroseconds(spec, batch, 1, {width, 4});
  };
  EXPECT_LT(us(256, 16), us(256, 4));
  EXPECT_LE(us(1, 4), us(1, 16));
  EXPECT_GT(us(256, 16), us(1, 16));
}

} // namespace
} // namespace lina
