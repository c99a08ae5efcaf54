//===- TuningStore.cpp - Every candidate of every tuning run -----------===//
//
// Part of lina. Each candidate is committed on its own as soon as it is
// timed, so a tune that is killed keeps everything it measured and the next
// run skips those schedules.
//
//===----------------------------------------------------------------------===//
#include "CacheImpl.h"
#include "Sqlite.h"

#include <cmath>
#include <sstream>

namespace lina::cache {

const char *toString(CandidateStatus status) {
  switch (status) {
  case CandidateStatus::Ok:
    return "ok";
  case CandidateStatus::CompileError:
    return "compile_error";
  case CandidateStatus::LaunchError:
    return "launch_error";
  case CandidateStatus::Mismatch:
    return "mismatch";
  case CandidateStatus::Timeout:
    return "timeout";
  }
  return "?";
}

std::optional<CandidateStatus> parseCandidateStatus(std::string_view text) {
  for (CandidateStatus s :
       {CandidateStatus::Ok, CandidateStatus::CompileError,
        CandidateStatus::LaunchError, CandidateStatus::Mismatch,
        CandidateStatus::Timeout})
    if (text == toString(s))
      return s;
  return std::nullopt;
}

std::string candidateProblem(const Schedule &schedule,
                             std::optional<double> timeMs,
                             const ScheduleCheck &check) {
  if (timeMs && !(std::isfinite(*timeMs) && *timeMs >= 0)) {
    std::ostringstream time;
    time << *timeMs;
    return "has a time of " + time.str() + " ms, not a finite number >= 0";
  }
  if (schedule.chunkSize < 1 || schedule.tileV < 1 || schedule.warps < 1)
    return "has a schedule number below 1";
  if (check) {
    std::string problem = check(schedule);
    if (!problem.empty())
      return "is no schedule a tune records: " + problem;
  }
  return "";
}

std::string Schedule::str() const {
  return "chunk=" + std::to_string(chunkSize) +
         " tile_v=" + std::to_string(tileV) +
         " warps=" + std::to_string(warps) + " " + strategy;
}

namespace {

/// The candidate columns, in the order readCandidate() expects.
constexpr const char *kCandidateColumns =
    "c.chunk_size, c.tile_v, c.warps, c.strategy, c.status, c.time_ms, "
    "c.error, c.created";

/// Ok candidates fastest first (those without a time after them), then the
/// failures in schedule order: the order of `lina cache show`'s table.
constexpr const char *kCandidateOrder =
    " ORDER BY c.status != 'ok', c.time_ms IS NULL, c.time_ms, c.chunk_size, "
    "c.tile_v, c.warps, c.strategy";

Candidate readCandidate(Statement &s) {
  Candidate c;
  c.schedule.chunkSize = s.columnInt(0);
  c.schedule.tileV = s.columnInt(1);
  c.schedule.warps = s.columnInt(2);
  c.schedule.strategy = s.columnText(3);
  // The CHECK constraint admits only known statuses.
  c.status = parseCandidateStatus(s.columnText(4))
                 .value_or(CandidateStatus::LaunchError);
  c.timeMs = s.columnOptionalDouble(5);
  c.error = s.columnText(6);
  c.createdAt = s.columnInt(7);
  return c;
}

} // namespace

std::vector<Candidate> readCandidates(Cache::Impl &impl,
                                      const std::string &digest) {
  std::string sql = std::string("SELECT ") + kCandidateColumns +
                    " FROM candidates c JOIN tunings t ON t.id = c.tuning_id"
                    " WHERE t.key = ?1" +
                    kCandidateOrder;
  std::vector<Candidate> out;
  Statement s(impl.db, sql.c_str());
  s.bindText(1, digest);
  int rc;
  while ((rc = s.step()) == SQLITE_ROW)
    out.push_back(readCandidate(s));
  if (rc != SQLITE_DONE)
    impl.fail(rc, "read tuning results");
  return out;
}

namespace {

bool storeCandidate(Cache::Impl *impl, const TuningKey &key,
                    const Candidate &candidate) {
  Transaction tx(*impl, "record a tuning candidate");
  if (!tx.ok())
    return false;
  int64_t now = unixNow();
  std::string digest = key.digest();
  // The first name a key was tuned under stays; a row an older lina wrote
  // without one takes this one.
  Statement tuning(impl->db,
                   "INSERT INTO tunings(key, spec, gpu, arch, sm_count, "
                   "driver, nvrtc, lina, bucket, created, spec_name) "
                   "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) "
                   "ON CONFLICT(key) DO UPDATE SET spec_name = "
                   "excluded.spec_name WHERE tunings.spec_name = '' AND "
                   "excluded.spec_name != ''");
  tuning.bindText(1, digest).bindText(2, key.spec).bindText(3, key.gpuName);
  tuning.bindText(4, key.arch).bind(5, key.smCount);
  tuning.bindText(6, key.driverVersion).bindText(7, key.nvrtcVersion);
  tuning.bindText(8, key.linaVersion).bindText(9, key.shapeBucket);
  tuning.bind(10, now).bindText(11, key.specName);
  int rc = tuning.run();
  if (rc != SQLITE_DONE)
    return tx.abort(rc);
  Statement row(
      impl->db,
      "INSERT INTO candidates(tuning_id, chunk_size, tile_v, warps, strategy, "
      "status, time_ms, error, created) SELECT id, ?2, ?3, ?4, ?5, ?6, ?7, "
      "?8, ?9 FROM tunings WHERE key = ?1 ON CONFLICT(tuning_id, chunk_size, "
      "tile_v, warps, strategy) DO UPDATE SET "
      "status = excluded.status, time_ms = excluded.time_ms, "
      "error = excluded.error, created = excluded.created");
  const Schedule &sched = candidate.schedule;
  row.bindText(1, digest).bind(2, sched.chunkSize).bind(3, sched.tileV);
  row.bind(4, sched.warps).bindText(5, sched.strategy);
  row.bindText(6, toString(candidate.status)).bind(7, candidate.timeMs);
  // NVRTC logs can run to megabytes; the start says what went wrong and the
  // cache is not the place to archive the rest.
  constexpr size_t kMaxError = 64 * 1024;
  row.bindText(8, std::string_view(candidate.error).substr(0, kMaxError));
  row.bind(9, now);
  rc = row.run();
  if (rc != SQLITE_DONE)
    return tx.abort(rc);
  return tx.commit();
}

} // namespace

bool Cache::recordCandidate(const TuningKey &key, const Candidate &candidate) {
  if (!impl)
    return false;
  Impl::Locked locked(*impl);
  // As putCubin: a file that cannot take it gives way to memory.
  return impl->retryInMemory(
      [&] { return storeCandidate(impl.get(), key, candidate); });
}

std::vector<Candidate> Cache::candidates(const TuningKey &key) {
  if (!impl)
    return {};
  Impl::Locked locked(*impl);
  return readCandidates(*impl, key.digest());
}

std::optional<Candidate> Cache::best(const TuningKey &key,
                                     const ScheduleCheck &check) {
  if (!impl)
    return std::nullopt;
  Impl::Locked locked(*impl);
  // Fastest first, read one at a time: the first sound row is the answer,
  // so a bad one costs a row, not the whole table.
  std::string digest = key.digest();
  std::string sql = std::string("SELECT ") + kCandidateColumns +
                    ", typeof(c.time_ms) FROM candidates c JOIN tunings t ON "
                    "t.id = c.tuning_id WHERE t.key = ?1 AND c.status = 'ok' "
                    "AND c.time_ms IS NOT NULL" +
                    kCandidateOrder;
  Statement s(impl->db, sql.c_str());
  s.bindText(1, digest);
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) {
    Candidate c = readCandidate(s);
    std::string type = s.columnText(8);
    // Text in the REAL column reads as 0 ms and would win.
    std::string problem = type == "real" || type == "integer"
                              ? candidateProblem(c.schedule, c.timeMs, check)
                              : "has a time that is not a number";
    if (problem.empty())
      return c;
    std::string row = digest.substr(0, 16) + " " + c.schedule.str();
    if (impl->warnedRows.insert(row).second)
      impl->warn("ignoring candidate " + c.schedule.str() + " of tuning key " +
                 digest.substr(0, 16) + " in the cache " + impl->where() +
                 ": it " + problem);
  }
  if (rc != SQLITE_DONE)
    impl->fail(rc, "read tuning results");
  return std::nullopt;
}

} // namespace lina::cache
