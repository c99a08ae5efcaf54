//===- HumanUnitsTest.cpp - Sizes, ages, durations ----------------------===//
//
// Part of lina. What `lina cache list` prints for a size and an age, what
// `lina tune` prints for elapsed time, and which `--older-than` values
// `lina cache prune` takes (anything else is a usage error).
//
//===----------------------------------------------------------------------===//
#include "HumanUnits.h"

#include <gtest/gtest.h>

using namespace lina::cli;

namespace {

TEST(HumanUnits, Bytes) {
  EXPECT_EQ(formatBytes(0), "0 B");
  EXPECT_EQ(formatBytes(1023), "1023 B");
  EXPECT_EQ(formatBytes(1024), "1.0 KiB");
  EXPECT_EQ(formatBytes(49357), "48.2 KiB");
  EXPECT_EQ(formatBytes(int64_t(3) << 29), "1.5 GiB");
}

TEST(HumanUnits, Ages) {
  EXPECT_EQ(formatAge(-5), "just now");
  EXPECT_EQ(formatAge(0), "0 s ago");
  EXPECT_EQ(formatAge(59), "59 s ago");
  EXPECT_EQ(formatAge(3 * 60 + 59), "3 min ago");
  EXPECT_EQ(formatAge(5 * 3600), "5 h ago");
  EXPECT_EQ(formatAge(47 * 3600), "47 h ago");
  EXPECT_EQ(formatAge(2 * 86400), "2 days ago");
  EXPECT_EQ(formatAge(59 * 86400), "59 days ago");
  EXPECT_EQ(formatAge(60 * 86400), "2 months ago");
  EXPECT_EQ(formatAge(800 * 86400), "2 years ago");
  EXPECT_EQ(formatAge(400 * 86400), "13 months ago");
}

TEST(HumanUnits, Seconds) {
  EXPECT_EQ(formatSeconds(0.4), "0 s");
  EXPECT_EQ(formatSeconds(14.2), "14 s");
  EXPECT_EQ(formatSeconds(125), "2 min 5 s");
  EXPECT_EQ(formatSeconds(3780), "1 h 3 min");
  EXPECT_EQ(formatSeconds(-3), "0 s");
}

TEST(HumanUnits, Durations) {
  EXPECT_EQ(parseDuration("30d"), 30 * 86400);
  EXPECT_EQ(parseDuration("12h"), 12 * 3600);
  EXPECT_EQ(parseDuration("90m"), 90 * 60);
  EXPECT_EQ(parseDuration("45s"), 45);
  EXPECT_EQ(parseDuration("2w"), 14 * 86400);
  for (const char *bad : {"", "d", "30", "30x", "-3d", "0d", "3.5d", "30 d",
                          "d30", "30dd", "99999999999999999999d", "36501d"})
    EXPECT_FALSE(parseDuration(bad).has_value()) << bad;
}

} // namespace
