//===- TuningStore.cpp - Every candidate of every tuning run -----------===//
//
// Part of lina. Each candidate is committed on its own as soon as it is
// timed, so a tune that is killed keeps everything it measured and the next
// run skips those schedules.
//
//===----------------------------------------------------------------------===//
#include "CacheImpl.h"
#include "Sqlite.h"

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

/// The rows of \p key matching \p filter ("" for all), ordered; at most
/// \p limit (0: all).
std::vector<Candidate> query(Cache::Impl &impl, const TuningKey &key,
                             const char *filter, int limit) {
  std::string sql = std::string("SELECT ") + kCandidateColumns +
                    " FROM candidates c JOIN tunings t ON t.id = c.tuning_id"
                    " WHERE t.key = ?1" +
                    filter + kCandidateOrder;
  if (limit > 0)
    sql += " LIMIT " + std::to_string(limit);
  std::vector<Candidate> out;
  Statement s(impl.db, sql.c_str());
  s.bindText(1, key.digest());
  int rc;
  while ((rc = s.step()) == SQLITE_ROW)
    out.push_back(readCandidate(s));
  if (rc != SQLITE_DONE)
    impl.fail(rc, "read tuning results");
  return out;
}

} // namespace

namespace {

bool storeCandidate(Cache::Impl *impl, const TuningKey &key,
                    const Candidate &candidate) {
  Transaction tx(*impl, "record a tuning candidate");
  if (!tx.ok())
    return false;
  int64_t now = unixNow();
  std::string digest = key.digest();
  Statement tuning(impl->db,
                   "INSERT INTO tunings(key, spec, gpu, arch, sm_count, "
                   "driver, nvrtc, lina, bucket, created) VALUES(?1, ?2, ?3, "
                   "?4, ?5, ?6, ?7, ?8, ?9, ?10) ON CONFLICT(key) DO NOTHING");
  tuning.bindText(1, digest).bindText(2, key.spec).bindText(3, key.gpuName);
  tuning.bindText(4, key.arch).bind(5, key.smCount);
  tuning.bindText(6, key.driverVersion).bindText(7, key.nvrtcVersion);
  tuning.bindText(8, key.linaVersion).bindText(9, key.shapeBucket);
  tuning.bind(10, now);
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
  return query(*impl, key, "", 0);
}

std::optional<Candidate> Cache::best(const TuningKey &key) {
  if (!impl)
    return std::nullopt;
  Impl::Locked locked(*impl);
  std::vector<Candidate> rows =
      query(*impl, key, " AND c.status = 'ok' AND c.time_ms IS NOT NULL", 1);
  if (rows.empty())
    return std::nullopt;
  return rows.front();
}

} // namespace lina::cache
