//===- HumanUnits.cpp - Times, ages and sizes as people write them -----===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "HumanUnits.h"

#include <cctype>
#include <cmath>
#include <cstdio>

namespace lina::cli {

namespace {

constexpr int64_t kMinute = 60, kHour = 60 * kMinute, kDay = 24 * kHour;

std::string plural(int64_t n, const char *unit) {
  return std::to_string(n) + " " + unit + (n == 1 ? "" : "s");
}

} // namespace

std::string formatBytes(int64_t bytes) {
  if (bytes < 1024)
    return std::to_string(bytes) + " B";
  const char *units[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = double(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit < 3) {
    value /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", value, units[unit]);
  return buf;
}

std::string formatAge(int64_t seconds) {
  if (seconds < 0)
    return "just now";
  if (seconds < kMinute)
    return std::to_string(seconds) + " s ago";
  if (seconds < kHour)
    return std::to_string(seconds / kMinute) + " min ago";
  // Up to two days in hours: "36 h ago" says more than "1 day ago".
  if (seconds < 2 * kDay)
    return std::to_string(seconds / kHour) + " h ago";
  if (seconds < 60 * kDay)
    return plural(seconds / kDay, "day") + " ago";
  if (seconds < 730 * kDay)
    return plural(seconds / (30 * kDay), "month") + " ago";
  return plural(seconds / (365 * kDay), "year") + " ago";
}

std::string formatSeconds(double seconds) {
  int64_t s = seconds < 0 ? 0 : int64_t(std::llround(seconds));
  if (s < kMinute)
    return std::to_string(s) + " s";
  if (s < kHour)
    return std::to_string(s / kMinute) + " min " +
           std::to_string(s % kMinute) + " s";
  return std::to_string(s / kHour) + " h " +
         std::to_string(s % kHour / kMinute) + " min";
}

std::optional<int64_t> parseDuration(const std::string &text) {
  if (text.size() < 2 || !std::isdigit(static_cast<unsigned char>(text[0])))
    return std::nullopt;
  int64_t unit = 0;
  switch (text.back()) {
  case 's':
    unit = 1;
    break;
  case 'm':
    unit = kMinute;
    break;
  case 'h':
    unit = kHour;
    break;
  case 'd':
    unit = kDay;
    break;
  case 'w':
    unit = 7 * kDay;
    break;
  default:
    return std::nullopt;
  }
  constexpr int64_t kLimit = 100 * 365 * kDay;
  int64_t count = 0;
  for (size_t i = 0; i + 1 < text.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(text[i])))
      return std::nullopt;
    count = count * 10 + (text[i] - '0');
    if (count > kLimit)
      return std::nullopt;
  }
  if (count < 1 || count > kLimit / unit)
    return std::nullopt;
  return count * unit;
}

} // namespace lina::cli
