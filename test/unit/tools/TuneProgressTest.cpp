//===- TuneProgressTest.cpp - Elapsed time and ETA of a tune ------------===//
//
// Part of lina. The ETA counts only candidates tried now: those read back
// from the cache take no time, and a resumed tune must not promise the
// rest as fast.
//
//===----------------------------------------------------------------------===//
#include "TuneProgress.h"

#include <gtest/gtest.h>

using namespace lina::cli;

namespace {

TEST(TuneProgress, EtaFromTheCandidatesTriedSoFar) {
  EXPECT_EQ(TuneProgress::timing(7, 12, 14.0, 7), "elapsed 14 s, ETA 10 s");
  // Five read back, two tried in 4 s: 2 s each for the ten left.
  EXPECT_EQ(TuneProgress::timing(10, 20, 4.0, 2), "elapsed 4 s, ETA 20 s");
  EXPECT_EQ(TuneProgress::timing(3, 100, 1.0, 3), "elapsed 1 s, ETA 32 s");
  EXPECT_EQ(TuneProgress::timing(2, 116, 125.0, 2),
            "elapsed 2 min 5 s, ETA 1 h 58 min");
}

TEST(TuneProgress, NoEtaBeforeATrialOrAfterTheLast) {
  EXPECT_EQ(TuneProgress::timing(3, 10, 0.2, 0), "elapsed 0 s");
  EXPECT_EQ(TuneProgress::timing(12, 12, 20.0, 12), "elapsed 20 s");
}

} // namespace
