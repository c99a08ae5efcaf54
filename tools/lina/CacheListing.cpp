//===- CacheListing.cpp - Cache entries as a table or as JSON ----------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "CacheListing.h"

#include "CacheSpecNames.h"
#include "HumanUnits.h"

#include "lina/Autotune/BackwardTuning.h"
#include "lina/Autotune/DecodeTuning.h"
#include "lina/Autotune/ScheduleKnobs.h"

#include <algorithm>
#include <array>
#include <cstdio>

namespace lina::cli {

namespace {

using Kind = cache::CacheEntry::Kind;

std::string formatMs(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g ms", ms);
  return buf;
}

/// "NVIDIA H200 sm_90" for a tuning result; a cubin is for an arch only.
std::string gpuText(const cache::CacheEntry &e) {
  if (e.kind == Kind::Cubin)
    return e.arch.empty() ? "-" : e.arch;
  return e.gpuName + " " + e.arch;
}

/// "C64 tv32 w4 fused", "w16 x4" for a decode schedule or "C16 tv32 w4
/// backward" for a backward's: the names of `lina tune`'s tables.
std::string scheduleName(const cache::Schedule &schedule) {
  if (std::optional<DecodeSchedule> decode = decodeFromCacheSchedule(schedule))
    return describe(*decode);
  if (std::optional<BackwardScheduleOptions> backward =
          backwardFromCacheSchedule(schedule))
    return describe(*backward) + " backward";
  return describe(fromCacheSchedule(schedule));
}

llvm::json::Value orNull(const std::string &text) {
  if (text.empty())
    return nullptr;
  return text;
}

} // namespace

EntryName entryName(const cache::CacheEntry &e) {
  if (!e.specName.empty())
    return {e.specName, true};
  if (e.kind == Kind::Tuning)
    return {presetNameForSpecText(e.spec), false};
  return {};
}

const char *kindName(const cache::CacheEntry &e) {
  return e.kind == Kind::Cubin ? "cubin" : "tuning";
}

llvm::json::Object entryToJson(const cache::CacheEntry &e, int64_t now) {
  bool tuning = e.kind == Kind::Tuning;
  EntryName name = entryName(e);
  llvm::json::Value bestMs = nullptr;
  if (e.bestMs)
    bestMs = *e.bestMs;
  auto ifTuning = [&](llvm::json::Value v) -> llvm::json::Value {
    if (!tuning)
      return nullptr;
    return v;
  };
  return llvm::json::Object{
      {"key", e.key},
      {"short_key", e.shortKey},
      {"kind", kindName(e)},
      {"spec_name", orNull(name.name)},
      {"spec_name_recorded", name.recorded},
      {"spec", ifTuning(e.spec)},
      {"bucket", ifTuning(e.bucket)},
      {"gpu", ifTuning(e.gpuName)},
      {"arch", orNull(e.arch)},
      {"sm_count", ifTuning(e.smCount)},
      {"created", e.createdAt},
      {"updated", e.updatedAt},
      {"age_seconds", now - e.updatedAt},
      {"age", formatAge(now - e.updatedAt)},
      {"bytes", e.bytes},
      {"size", formatBytes(e.bytes)},
      {"candidates", ifTuning(e.candidates)},
      {"ok_candidates", ifTuning(e.okCandidates)},
      {"best_ms", std::move(bestMs)},
  };
}

llvm::json::Object detailToJson(const cache::CacheEntryDetail &d,
                                int64_t now) {
  llvm::json::Object o = entryToJson(d.entry, now);
  bool tuning = d.entry.kind == Kind::Tuning;
  auto cubinOnly = [&](llvm::json::Value v) -> llvm::json::Value {
    if (tuning)
      return nullptr;
    return v;
  };
  auto tuningOnly = [&](llvm::json::Value v) -> llvm::json::Value {
    if (!tuning)
      return nullptr;
    return v;
  };
  o["checksum"] = cubinOnly(d.checksum);
  o["checksum_matches"] = cubinOnly(d.checksumMatches);
  o["driver"] = tuningOnly(d.driverVersion);
  o["nvrtc"] = tuningOnly(d.nvrtcVersion);
  o["lina_version"] = tuningOnly(d.linaVersion);
  llvm::json::Array results;
  for (const cache::Candidate &c : d.results) {
    llvm::json::Value timeMs = nullptr;
    if (c.timeMs)
      timeMs = *c.timeMs;
    results.push_back(llvm::json::Object{
        {"schedule", scheduleName(c.schedule)},
        {"chunk_size", c.schedule.chunkSize},
        {"tile_v", c.schedule.tileV},
        {"warps", c.schedule.warps},
        {"strategy", c.schedule.strategy},
        {"status", cache::toString(c.status)},
        {"time_ms", std::move(timeMs)},
        {"error", c.error},
        {"created", c.createdAt},
    });
  }
  o["results"] = tuningOnly(std::move(results));
  return o;
}

void printEntryTable(const std::vector<cache::CacheEntry> &entries,
                     int64_t now) {
  if (entries.empty())
    return;
  constexpr size_t kColumns = 8;
  using Row = std::array<std::string, kColumns>;
  std::vector<Row> rows;
  rows.push_back(
      {"KEY", "KIND", "SPEC", "BUCKET", "GPU", "AGE", "SIZE", "CANDIDATES"});
  bool derived = false;
  for (const cache::CacheEntry &e : entries) {
    EntryName name = entryName(e);
    std::string spec = name.name.empty() ? "-" : name.name;
    if (!name.name.empty() && !name.recorded) {
      spec += "*";
      derived = true;
    }
    std::string candidates;
    if (e.kind == Kind::Tuning)
      candidates = std::to_string(e.candidates) + " candidates, " +
                   std::to_string(e.okCandidates) + " ok" +
                   (e.bestMs ? ", best " + formatMs(*e.bestMs) : "");
    rows.push_back({e.shortKey, kindName(e), spec,
                    e.kind == Kind::Tuning ? e.bucket : "-", gpuText(e),
                    formatAge(now - e.updatedAt), formatBytes(e.bytes),
                    candidates});
  }
  std::array<size_t, kColumns> width{};
  for (const Row &row : rows)
    for (size_t i = 0; i < kColumns; ++i)
      width[i] = std::max(width[i], row[i].size());
  for (const Row &row : rows) {
    std::string line;
    for (size_t i = 0; i < kColumns; ++i) {
      // The size is a number: right-aligned. The last column is not padded.
      std::string cell = row[i];
      std::string pad(width[i] - cell.size(), ' ');
      if (i + 1 == kColumns)
        line += cell;
      else
        line += (i == 6 ? pad + cell : cell + pad) + "  ";
    }
    while (!line.empty() && line.back() == ' ')
      line.pop_back();
    std::printf("%s\n", line.c_str());
  }
  if (derived)
    std::printf("* the preset whose spec it is: an older lina did not record "
                "the name\n");
}

} // namespace lina::cli
