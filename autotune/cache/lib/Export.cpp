//===- Export.cpp - Export to and import from a standalone file --------===//
//
// Part of lina. The export format is a SQLite database with the cache's own
// schema: cubins stay binary, the snapshot is consistent (VACUUM INTO reads
// in one transaction), and an import is checked with the same tests open()
// uses plus SQLite's integrity check and every row's checksum or key.
//
//===----------------------------------------------------------------------===//
#include "CacheImpl.h"
#include "Schema.h"
#include "Sqlite.h"

#include "lina/Autotune/Sha256.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace lina::cache {

namespace {

bool setError(std::string *error, std::string message) {
  if (error)
    *error = std::move(message);
  return false;
}

/// True when \p path names the cache's own database file: exporting onto it
/// would rename a snapshot over the live file, importing it would merge it
/// into itself.
bool isCacheFile(const Cache::Impl &impl, const std::string &path) {
  struct stat st;
  return !impl.inMemory && stat(path.c_str(), &st) == 0 &&
         st.st_dev == impl.device && st.st_ino == impl.inode;
}

/// Each table's rows as the cache writes them, as an SQL condition (their
/// types: the ranges are checked row by row, to name the row). The
/// strategy is any text: a newer lina may have more strategies.
constexpr std::pair<const char *, const char *> kColumnTypes[] = {
    {"cubins", "typeof(key) = 'text' AND typeof(blob) = 'blob' AND "
               "typeof(checksum) = 'text' AND typeof(created) = 'integer'"},
    {"tunings",
     "typeof(key) = 'text' AND typeof(spec) = 'text' AND typeof(gpu) = "
     "'text' AND typeof(arch) = 'text' AND typeof(sm_count) = 'integer' AND "
     "typeof(driver) = 'text' AND typeof(nvrtc) = 'text' AND typeof(lina) = "
     "'text' AND typeof(bucket) = 'text' AND typeof(created) = 'integer'"},
    {"candidates",
     "typeof(chunk_size) = 'integer' AND typeof(tile_v) = 'integer' AND "
     "typeof(warps) = 'integer' AND typeof(strategy) = 'text' AND "
     "(time_ms IS NULL OR typeof(time_ms) = 'real') AND "
     "typeof(error) = 'text' AND typeof(created) = 'integer'"},
};

/// The same for the columns schema 2 added (a version 1 file has none).
constexpr std::pair<const char *, const char *> kColumnTypesV2[] = {
    {"cubins", "typeof(spec_name) = 'text' AND typeof(arch) = 'text'"},
    {"tunings", "typeof(spec_name) = 'text'"},
};

/// Why \p path may not be imported, or "" when it may; \p version is set
/// to its schema version. Reads it through a separate read-only
/// connection, so a bad file never touches the cache.
std::string validateImport(const std::string &path, const ScheduleCheck &check,
                           int64_t &version) {
  FileCheck file = checkFile(path);
  if (!file.exists)
    return "cannot read " + path +
           (file.error.empty() ? ": no such file" : ": " + file.error);
  if (!file.error.empty())
    return "cannot read " + path + ": " + file.error;
  if (!file.notSqlite.empty())
    return path + " " + file.notSqlite;
  if (file.maybeTruncated)
    return path + " is truncated (" + std::to_string(file.size) + " of " +
           std::to_string(file.expectedSize) + " bytes)";

  sqlite3 *db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  struct Closer {
    sqlite3 *&db;
    ~Closer() { sqlite3_close_v2(db); }
  } closer{db};
  if (rc != SQLITE_OK)
    return "cannot open " + path + ": " + errorMessage(db, rc);

  SchemaCheck schema = checkSchema(db);
  if (schema.kind == SchemaCheck::Empty)
    return path + " is empty, not a lina cache export";
  // An older lina's export is merged as it is: the columns it lacks take
  // their defaults.
  if (schema.kind != SchemaCheck::Ours && schema.kind != SchemaCheck::Older)
    return path + " " + describe(schema);
  version = schema.version;
  std::optional<std::string> integrity =
      queryText(db, "PRAGMA integrity_check(1)", &rc);
  if (!integrity)
    return path + " is corrupt (" + errorMessage(db, rc) + ")";
  if (*integrity != "ok")
    return path + " is corrupt (" + *integrity + ")";

  // SQLite keeps any value in any column. A time that is text would read
  // as 0 ms and win every tune; a creation time that is text compares newer
  // than every number and would win every later merge.
  std::vector<std::pair<const char *, const char *>> types(
      std::begin(kColumnTypes), std::end(kColumnTypes));
  if (version >= 2)
    types.insert(types.end(), std::begin(kColumnTypesV2),
                 std::end(kColumnTypesV2));
  for (auto [table, test] : types) {
    std::string sql = std::string("SELECT count(*) FROM ") + table +
                      " WHERE NOT (" + test + ")";
    std::optional<int64_t> wrong = queryInt(db, sql.c_str(), &rc);
    if (!wrong)
      return path + " cannot be read (" + errorMessage(db, rc) + ")";
    if (*wrong > 0)
      return path + ": " + std::to_string(*wrong) + " rows of " + table +
             " hold values of the wrong type or range";
  }
  // Rows are checked as the cache would use them: a cubin that fails its
  // checksum would be deleted on first read, a tuning key whose digest does
  // not match its fields could never be found.
  {
    Statement s(db, "SELECT key, blob, checksum FROM cubins");
    while ((rc = s.step()) == SQLITE_ROW)
      if (sha256Hex(s.columnBlob(1)) != s.columnText(2))
        return path + ": cubin " + s.columnText(0) +
               " does not match its checksum";
    if (rc != SQLITE_DONE)
      return path + " cannot be read (" + errorMessage(db, rc) + ")";
  }
  {
    Statement s(db, "SELECT key, spec, gpu, arch, sm_count, driver, nvrtc, "
                    "lina, bucket FROM tunings");
    while ((rc = s.step()) == SQLITE_ROW) {
      TuningKey key;
      key.spec = s.columnText(1);
      key.gpuName = s.columnText(2);
      key.arch = s.columnText(3);
      key.smCount = s.columnInt(4);
      key.driverVersion = s.columnText(5);
      key.nvrtcVersion = s.columnText(6);
      key.linaVersion = s.columnText(7);
      key.shapeBucket = s.columnText(8);
      if (key.digest() != s.columnText(0))
        return path + ": tuning key " + s.columnText(0) +
               " does not match its fields";
    }
    if (rc != SQLITE_DONE)
      return path + " cannot be read (" + errorMessage(db, rc) + ")";
  }
  std::optional<int64_t> bad = queryInt(
      db,
      "SELECT count(*) FROM candidates c WHERE c.status NOT IN ('ok', "
      "'compile_error', 'launch_error', 'mismatch', 'timeout') OR NOT EXISTS "
      "(SELECT 1 FROM tunings t WHERE t.id = c.tuning_id)",
      &rc);
  if (!bad)
    return path + " cannot be read (" + errorMessage(db, rc) + ")";
  if (*bad > 0)
    return path + ": " + std::to_string(*bad) +
           " candidates have an unknown status or no tuning key";
  // Each candidate as best() would judge it. A time of infinity, a negative
  // one or a chunk size no tune tries would otherwise become what kernels
  // of that bucket use; the file is refused whole, naming the first.
  {
    Statement s(db, "SELECT t.key, c.chunk_size, c.tile_v, c.warps, "
                    "c.strategy, c.time_ms FROM candidates c JOIN tunings t "
                    "ON t.id = c.tuning_id ORDER BY t.key, c.chunk_size, "
                    "c.tile_v, c.warps, c.strategy");
    while ((rc = s.step()) == SQLITE_ROW) {
      Schedule schedule{s.columnInt(1), s.columnInt(2), s.columnInt(3),
                        s.columnText(4)};
      std::string problem =
          candidateProblem(schedule, s.columnOptionalDouble(5), check);
      if (!problem.empty())
        return path + ": candidate " + schedule.str() + " of tuning key " +
               s.columnText(0).substr(0, 16) + " " + problem;
    }
    if (rc != SQLITE_DONE)
      return path + " cannot be read (" + errorMessage(db, rc) + ")";
  }
  return "";
}

/// The statements that merge a file of schema \p version: its rows, with
/// the columns of a later schema at their defaults.
std::string mergeCubins(int64_t version) {
  const char *added = version >= 2 ? "spec_name, arch" : "'', ''";
  return std::string("INSERT INTO main.cubins(key, blob, checksum, created, "
                     "spec_name, arch) SELECT key, blob, checksum, created, ") +
         added +
         " FROM incoming.cubins WHERE true "
         "ON CONFLICT(key) DO UPDATE SET blob = excluded.blob, "
         "checksum = excluded.checksum, created = excluded.created, "
         "spec_name = excluded.spec_name, arch = excluded.arch "
         "WHERE excluded.created > cubins.created";
}

std::string mergeTunings(int64_t version) {
  const char *added = version >= 2 ? "spec_name" : "''";
  return std::string("INSERT INTO main.tunings(key, spec, gpu, arch, "
                     "sm_count, driver, nvrtc, lina, bucket, created, "
                     "spec_name) SELECT key, spec, gpu, arch, sm_count, "
                     "driver, nvrtc, lina, bucket, created, ") +
         added + " FROM incoming.tunings WHERE true ON CONFLICT(key) DO NOTHING";
}

/// Tuning ids differ between files: candidates are matched by tuning key.
constexpr const char *kMergeCandidates =
    "INSERT INTO main.candidates(tuning_id, chunk_size, tile_v, warps, "
    "strategy, status, time_ms, error, created) "
    "SELECT t.id, c.chunk_size, c.tile_v, c.warps, c.strategy, c.status, "
    "c.time_ms, c.error, c.created FROM incoming.candidates c "
    "JOIN incoming.tunings it ON it.id = c.tuning_id "
    "JOIN main.tunings t ON t.key = it.key WHERE true "
    "ON CONFLICT(tuning_id, chunk_size, tile_v, warps, strategy) DO UPDATE "
    "SET status = excluded.status, time_ms = excluded.time_ms, "
    "error = excluded.error, created = excluded.created "
    "WHERE excluded.created > candidates.created";

} // namespace

bool Cache::exportTo(const std::string &path, std::string *error) {
  if (!impl || !impl->db)
    return setError(error, "no cache to export");
  Impl::Locked locked(*impl);
  if (isCacheFile(*impl, path))
    return setError(error, path + " is the cache itself");
  // Written beside the target and renamed over it, so a failed export never
  // leaves a half-written file under the name asked for.
  std::string tmp = path + ".tmp-" + std::to_string(getpid());
  ::unlink(tmp.c_str());
  Statement vacuum(impl->db, "VACUUM INTO ?1");
  vacuum.bindText(1, tmp);
  int rc = vacuum.run();
  if (rc != SQLITE_DONE) {
    std::string message = errorMessage(impl->db, rc);
    if (isCorruption(rc))
      impl->fail(rc, "export");
    ::unlink(tmp.c_str());
    return setError(error, "cannot write " + path + ": " + message);
  }
  // A rollback-journal file is one self-contained file: it can be read
  // without creating -wal and -shm files next to it.
  sqlite3 *out = nullptr;
  rc = sqlite3_open_v2(tmp.c_str(), &out, SQLITE_OPEN_READWRITE, nullptr);
  if (rc == SQLITE_OK)
    rc = execute(out, "PRAGMA journal_mode = DELETE");
  std::string message = errorMessage(out, rc);
  sqlite3_close_v2(out);
  if (rc != SQLITE_OK) {
    ::unlink(tmp.c_str());
    return setError(error, "cannot write " + path + ": " + message);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    message = std::strerror(errno);
    ::unlink(tmp.c_str());
    return setError(error, "cannot write " + path + ": " + message);
  }
  // Whoever exports means to carry the cache somewhere: the database file
  // should hold all of it too, not leave the newest entries in the WAL.
  impl->checkpoint();
  return true;
}

bool Cache::importFrom(const std::string &path, std::string *error,
                       ImportStats *stats, const ScheduleCheck &check) {
  if (!impl || !impl->db)
    return setError(error, "no cache to import into");
  {
    std::lock_guard<std::mutex> lock(impl->mutex);
    if (isCacheFile(*impl, path))
      return setError(error, path + " is the cache itself");
  }
  int64_t version = 0;
  std::string problem = validateImport(path, check, version);
  if (!problem.empty())
    return setError(error, problem);

  Impl::Locked locked(*impl);
  sqlite3 *db = impl->db;
  int rc;
  {
    Statement attach(db, "ATTACH DATABASE ?1 AS incoming");
    attach.bindText(1, path);
    rc = attach.run();
  }
  if (rc != SQLITE_DONE)
    return setError(error, "cannot open " + path + ": " + errorMessage(db, rc));
  // DETACH must run outside the transaction, hence after tx's scope.
  struct Detach {
    sqlite3 *db;
    ~Detach() { execute(db, "DETACH DATABASE incoming"); }
  } detach{db};

  ImportStats added;
  {
    Transaction tx(*impl, "import " + path);
    // The fault names the file and SQLite's error; it is acted on (the
    // cache moves into memory) once the lock is released.
    if (!tx.ok())
      return setError(error, impl->writeFault.empty()
                                 ? "cannot write to the cache " + impl->where()
                                 : impl->writeFault);
    std::string cubins = mergeCubins(version),
                tunings = mergeTunings(version);
    for (auto [sql, count] :
         {std::pair{cubins.c_str(), &added.cubins},
          std::pair{tunings.c_str(), &added.tunings},
          std::pair{kMergeCandidates, &added.candidates}}) {
      rc = execute(db, sql);
      if (rc != SQLITE_OK) {
        std::string message = errorMessage(db, rc);
        tx.abort(rc);
        return setError(error, "cannot import " + path + ": " + message);
      }
      *count = sqlite3_changes(db);
    }
    if (!tx.commit())
      return setError(error, impl->writeFault.empty()
                                 ? "cannot import " + path +
                                       ": the commit failed"
                                 : impl->writeFault);
  }
  if (stats)
    *stats = added;
  return true;
}

} // namespace lina::cache
