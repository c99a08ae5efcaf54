//===- DeprecatedNamesTest.cpp - lina_c.h's old names of the mma knob ----===//
//
// Part of lina. The C side (DeprecatedNames.c) sets and reads the schedule's
// `mma` knob by its deprecated names; here its answers, and the layout that
// keeps callers built against the old header working.
//
//===----------------------------------------------------------------------===//
#include "lina/lina_c.h"

#include <gtest/gtest.h>

#include <cstddef>

extern "C" {
int lina_test_wgmma_field_is_mma(void);
int lina_test_wgmma_writes_mma(void);
int lina_test_wgmma_enumerators(void);
}

namespace {

TEST(DeprecatedNames, TheOldCNamesMeanTheNewOnes) {
  EXPECT_TRUE(lina_test_wgmma_field_is_mma());
  EXPECT_TRUE(lina_test_wgmma_writes_mma());
  EXPECT_TRUE(lina_test_wgmma_enumerators());
}

// The field kept its place and size: a caller built with `wgmma` passes
// the same bytes.
TEST(DeprecatedNames, TheScheduleKeepsItsLayout) {
  EXPECT_EQ(offsetof(lina_schedule, mma),
            offsetof(lina_schedule, segments) + sizeof(int64_t));
  EXPECT_EQ(sizeof(lina_schedule{}.mma), sizeof(int));
  EXPECT_EQ(sizeof(lina_schedule), 6 * sizeof(int64_t));
  EXPECT_EQ(int(LINA_MMA_DEFAULT), 0);
  EXPECT_EQ(int(LINA_MMA_WARP), 1);
  EXPECT_EQ(int(LINA_MMA_WARPGROUP), 2);
}

} // namespace
