//===- TuneSummary.cpp - What a chunk tune found -----------------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "TuneSummary.h"

#include "SpecJson.h"

#include "lina/Autotune/ScheduleKnobs.h"

namespace lina::cli {

namespace {

/// The trial's prefix for a kernel that compiled but cannot launch on its
/// registers (TuneTrial.cpp): pruned, as the space's own pruning is.
constexpr const char *kPrunedPrefix = "pruned: ";

bool prunedOnRegisters(const cache::Candidate &c) {
  return c.status != cache::CandidateStatus::Ok &&
         c.error.rfind(kPrunedPrefix, 0) == 0;
}

llvm::json::Value optionalMs(std::optional<double> ms) {
  if (ms)
    return *ms;
  return nullptr;
}

llvm::json::Value optionalText(const std::string &text) {
  if (text.empty())
    return nullptr;
  return text;
}

/// {"schedule", "time_ms"} of a row, or null.
llvm::json::Value brief(const TuneRow *row) {
  if (!row)
    return nullptr;
  return llvm::json::Object{{"schedule", scheduleToJson(row->schedule)},
                            {"time_ms", optionalMs(row->timeMs())}};
}

llvm::json::Value brief(const std::optional<cache::Candidate> &c) {
  if (!c)
    return nullptr;
  return llvm::json::Object{
      {"schedule", scheduleToJson(fromCacheSchedule(c->schedule))},
      {"time_ms", optionalMs(c->timeMs)}};
}

} // namespace

std::string TuneRow::status() const {
  if (!pruned.empty())
    return "pruned";
  if (!result)
    return "not_tried";
  if (prunedOnRegisters(*result))
    return "pruned";
  return cache::toString(result->status);
}

std::string TuneRow::reason() const {
  if (!pruned.empty())
    return pruned;
  if (!result || result->status == cache::CandidateStatus::Ok)
    return "";
  if (prunedOnRegisters(*result))
    return result->error.substr(std::string(kPrunedPrefix).size());
  return result->error;
}

std::optional<double> TuneRow::timeMs() const {
  if (result && result->status == cache::CandidateStatus::Ok)
    return result->timeMs;
  return std::nullopt;
}

const TuneRow *TuneSummary::winner() const {
  for (const TuneRow &row : rows)
    if (row.isWinner)
      return &row;
  return nullptr;
}

const TuneRow *TuneSummary::defaultRow() const {
  for (const TuneRow &row : rows)
    if (row.isDefault)
      return &row;
  return nullptr;
}

size_t TuneSummary::viable() const {
  size_t n = 0;
  for (const TuneRow &row : rows)
    n += row.pruned.empty();
  return n;
}

std::vector<TuneRow> spaceRows(const std::vector<SpaceCandidate> &space,
                               const ScheduleOptions &fallback) {
  std::vector<TuneRow> rows;
  for (const SpaceCandidate &c : space) {
    TuneRow row;
    row.schedule = c.schedule;
    row.name = describe(c.schedule);
    row.sharedBytes = c.sharedBytes;
    row.pruned = c.pruned;
    row.isDefault = sameSchedule(c.schedule, fallback);
    rows.push_back(std::move(row));
  }
  return rows;
}

void addRecorded(std::vector<TuneRow> &rows,
                 const std::vector<cache::Candidate> &recorded,
                 const std::optional<cache::Candidate> &winner) {
  for (TuneRow &row : rows) {
    cache::Schedule s = toCacheSchedule(row.schedule);
    for (const cache::Candidate &c : recorded)
      if (c.schedule == s)
        row.result = c;
    row.isWinner = winner && winner->schedule == s;
  }
}

llvm::json::Object scheduleToJson(const ScheduleOptions &s) {
  return llvm::json::Object{
      {"name", describe(s)},
      {"chunk_size", s.chunkSize},
      {"tile_v", s.tileV},
      {"warps", s.warps},
      {"strategy", toString(s.strategy)},
      {"prefetch", s.prefetch},
      {"segments", s.segments},
      {"mma", s.warpgroup ? "warpgroup" : "warp"},
      {"shared_state", s.sharedState},
      {"direct_decay", s.directDecay},
      {"two_ctas", s.twoCTAs},
  };
}

llvm::json::Object tuneToJson(const TuneSummary &t) {
  llvm::json::Array candidates;
  for (const TuneRow &row : t.rows) {
    llvm::json::Value shared = nullptr;
    if (row.sharedBytes > 0)
      shared = row.sharedBytes;
    candidates.push_back(llvm::json::Object{
        {"schedule", scheduleToJson(row.schedule)},
        {"status", row.status()},
        {"time_ms", optionalMs(row.timeMs())},
        {"reason", optionalText(row.reason())},
        {"shared_bytes", std::move(shared)},
        {"looked_at", row.lookedAt},
        {"recorded_earlier", row.recordedEarlier},
        {"default", row.isDefault},
        {"winner", row.isWinner},
    });
  }
  const TuneRow *winner = t.winner(), *fallback = t.defaultRow();
  llvm::json::Value speedup = nullptr;
  if (winner && fallback && winner->timeMs() && fallback->timeMs() &&
      *winner->timeMs() > 0)
    speedup = *fallback->timeMs() / *winner->timeMs();
  llvm::json::Value fastVsFull = nullptr;
  if (t.fastVsFull)
    fastVsFull = llvm::json::Object{
        {"fast", brief(t.fastVsFull->fast)},
        {"full", brief(t.fastVsFull->full)},
        {"fast_looked", t.fastVsFull->fastLooked},
        {"viable", t.fastVsFull->viable},
        {"ratio", t.fastVsFull->ratio},
    };
  bool dryRun = t.mode == "dry-run";
  auto ran = [&](llvm::json::Value v) -> llvm::json::Value {
    if (dryRun)
      return nullptr;
    return v;
  };
  llvm::json::Value budget = nullptr;
  if (t.mode == "fast")
    budget = t.budget;
  return llvm::json::Object{
      {"spec", specToJson(t.spec)},
      {"shape", llvm::json::Object{{"batch", t.shape.batch},
                                   {"seq_len", t.shape.seqLen},
                                   {"heads", t.spec.heads},
                                   {"value_heads", t.spec.valueHeads}}},
      {"bucket", ran(t.bucket)},
      {"key", ran(t.key)},
      {"gpu", llvm::json::Object{{"name", optionalText(t.gpu.name)},
                                 {"arch", optionalText(t.gpu.arch)},
                                 {"sm_count", t.gpu.smCount},
                                 {"simulated", t.simulated}}},
      {"nvrtc", ran(t.nvrtc)},
      {"shared_memory_limit", t.sharedMemoryLimit},
      {"mode", t.mode},
      {"budget", std::move(budget)},
      {"space", llvm::json::Object{{"candidates", t.rows.size()},
                                   {"viable", t.viable()}}},
      {"candidates", std::move(candidates)},
      {"looked", ran(t.result.looked)},
      {"tried", ran(t.result.tried)},
      {"recorded_earlier", ran(t.result.recorded)},
      {"finished", ran(t.result.finished)},
      {"seconds", ran(t.seconds)},
      {"best", brief(t.result.best)},
      {"winner", brief(winner)},
      {"default", llvm::json::Object{{"name", t.defaultName},
                                     {"time_ms", optionalMs(
                                         fallback ? fallback->timeMs()
                                                  : std::nullopt)}}},
      {"speedup_over_default", std::move(speedup)},
      {"fast_vs_full", std::move(fastVsFull)},
      {"saved", t.saved},
      {"not_saved_reason", optionalText(t.notSavedReason)},
      {"cache", optionalText(t.cachePath)},
      {"error", optionalText(t.error)},
      {"report", optionalText(t.reportPath)},
      {"report_error", optionalText(t.reportError)},
  };
}

} // namespace lina::cli
