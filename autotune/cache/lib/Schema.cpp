//===- Schema.cpp - The cache's tables and how a file is judged --------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "Schema.h"

#include "Sqlite.h"
#include "lina/Autotune/Cache.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace lina::cache {

namespace {

/// Schema version 2. Candidates are unique by (tuning, schedule) so that a
/// re-run replaces its earlier record and a resumed tune can skip what is
/// there; statuses are checked so a bad import cannot smuggle in others.
/// spec_name and a cubin's arch are for `lina cache list` only: no key
/// depends on them ('' in rows that a version 1 lina wrote).
constexpr const char *kCreateTables = R"sql(
CREATE TABLE cubins(
  key TEXT PRIMARY KEY,
  blob BLOB NOT NULL,
  checksum TEXT NOT NULL,
  created INTEGER NOT NULL,
  spec_name TEXT NOT NULL DEFAULT '',
  arch TEXT NOT NULL DEFAULT '');
CREATE TABLE tunings(
  id INTEGER PRIMARY KEY,
  key TEXT NOT NULL UNIQUE,
  spec TEXT NOT NULL,
  gpu TEXT NOT NULL,
  arch TEXT NOT NULL,
  sm_count INTEGER NOT NULL,
  driver TEXT NOT NULL,
  nvrtc TEXT NOT NULL,
  lina TEXT NOT NULL,
  bucket TEXT NOT NULL,
  created INTEGER NOT NULL,
  spec_name TEXT NOT NULL DEFAULT '');
CREATE TABLE candidates(
  tuning_id INTEGER NOT NULL REFERENCES tunings(id) ON DELETE CASCADE,
  chunk_size INTEGER NOT NULL,
  tile_v INTEGER NOT NULL,
  warps INTEGER NOT NULL,
  strategy TEXT NOT NULL,
  status TEXT NOT NULL CHECK(status IN
    ('ok', 'compile_error', 'launch_error', 'mismatch', 'timeout')),
  time_ms REAL,
  error TEXT NOT NULL DEFAULT '',
  created INTEGER NOT NULL,
  PRIMARY KEY(tuning_id, chunk_size, tile_v, warps, strategy));
)sql";

/// From version 1: the columns version 2 added, each with the default
/// that tells `lina cache list` the name was not recorded. ADD COLUMN with
/// a constant default rewrites no row, so this is quick on any size.
constexpr const char *kMigrateFrom1 = R"sql(
ALTER TABLE cubins ADD COLUMN spec_name TEXT NOT NULL DEFAULT '';
ALTER TABLE cubins ADD COLUMN arch TEXT NOT NULL DEFAULT '';
ALTER TABLE tunings ADD COLUMN spec_name TEXT NOT NULL DEFAULT '';
)sql";

/// Every column the code reads, per table: preparing these proves the
/// tables have the shape this build expects.
constexpr const char *kColumnProbes[] = {
    "SELECT key, blob, checksum, created, spec_name, arch FROM cubins",
    "SELECT id, key, spec, gpu, arch, sm_count, driver, nvrtc, lina, bucket, "
    "created, spec_name FROM tunings",
    "SELECT tuning_id, chunk_size, tile_v, warps, strategy, status, time_ms, "
    "error, created FROM candidates",
};

/// The same for version 1, the one older schema that is migrated: a file
/// that claims it but lacks a column is not migrated but replaced.
constexpr const char *kColumnProbesV1[] = {
    "SELECT key, blob, checksum, created FROM cubins",
    "SELECT id, key, spec, gpu, arch, sm_count, driver, nvrtc, lina, bucket, "
    "created FROM tunings",
    "SELECT tuning_id, chunk_size, tile_v, warps, strategy, status, time_ms, "
    "error, created FROM candidates",
};

uint32_t bigEndian(const unsigned char *p, int bytes) {
  uint32_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v = v << 8 | p[i];
  return v;
}

} // namespace

FileCheck checkFile(const std::string &path) {
  FileCheck c;
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT)
      c.error = std::strerror(errno);
    return c;
  }
  c.exists = true;
  c.device = st.st_dev;
  c.inode = st.st_ino;
  c.size = st.st_size;
  if (!S_ISREG(st.st_mode)) {
    c.error = "not a regular file";
    return c;
  }
  // An empty file is what SQLite itself makes of a new database.
  if (c.size == 0)
    return c;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    c.error = std::strerror(errno);
    return c;
  }
  unsigned char h[100];
  ssize_t n = pread(fd, h, sizeof h, 0);
  int readErrno = errno;
  ::close(fd);
  if (n < 0) {
    c.error = std::strerror(readErrno);
    return c;
  }
  if (n < static_cast<ssize_t>(sizeof h)) {
    c.notSqlite = "is too short to be a SQLite database (" +
                  std::to_string(c.size) + " bytes)";
    return c;
  }
  if (std::memcmp(h, "SQLite format 3", 16) != 0) {
    c.notSqlite = "is not a SQLite database";
    return c;
  }
  // Offsets from https://www.sqlite.org/fileformat.html#the_database_header.
  int64_t pageSize = bigEndian(h + 16, 2);
  if (pageSize == 1)
    pageSize = 65536;
  uint32_t changeCounter = bigEndian(h + 24, 4);
  uint32_t pageCount = bigEndian(h + 28, 4);
  uint32_t validFor = bigEndian(h + 92, 4);
  // The in-header page count is only meaningful when the version-valid-for
  // number matches the change counter (else SQLite uses the file size).
  if (changeCounter == validFor && pageCount > 0) {
    c.expectedSize = pageSize * pageCount;
    c.maybeTruncated = c.size < c.expectedSize;
  }
  return c;
}

SchemaCheck checkSchema(sqlite3 *db) {
  SchemaCheck c;
  auto failed = [&](int rc) {
    c.kind = SchemaCheck::Failed;
    c.rc = rc;
    c.detail = errorMessage(db, rc);
    return c;
  };
  // One statement, so one snapshot: read one at a time, the three could
  // straddle another process's creation of the schema and look foreign.
  Statement s(db, "SELECT (SELECT application_id FROM pragma_application_id),"
                  " (SELECT user_version FROM pragma_user_version),"
                  " (SELECT group_concat(name, ', ') FROM (SELECT name FROM"
                  " sqlite_master WHERE type = 'table' ORDER BY name))");
  int rc = s.step();
  if (rc != SQLITE_ROW)
    return failed(rc);
  int64_t appId = s.columnInt(0);
  c.version = s.columnInt(1);
  std::string tables = s.columnText(2);
  if (appId == 0 && c.version == 0 && tables.empty()) {
    c.kind = SchemaCheck::Empty;
    return c;
  }
  if (appId != kApplicationId) {
    c.kind = SchemaCheck::Foreign;
    c.detail = tables.empty() ? "no tables" : "tables: " + tables;
    return c;
  }
  if (c.version > kSchemaVersion) {
    c.kind = SchemaCheck::Newer;
    return c;
  }
  // Version 0 with our id is no schema lina ever wrote.
  if (c.version < 1) {
    c.kind = SchemaCheck::Incomplete;
    c.detail = "schema version " + std::to_string(c.version);
    return c;
  }
  bool older = c.version < kSchemaVersion;
  // Arrays of one type: the conditional keeps them arrays.
  const auto &probes = older ? kColumnProbesV1 : kColumnProbes;
  for (const char *probe : probes) {
    Statement columns(db, probe);
    if (columns.prepareResult() != SQLITE_OK) {
      if (isCorruption(columns.prepareResult()))
        return failed(columns.prepareResult());
      c.kind = SchemaCheck::Incomplete;
      c.detail = errorMessage(db, columns.prepareResult());
      return c;
    }
  }
  c.kind = older ? SchemaCheck::Older : SchemaCheck::Ours;
  return c;
}

namespace {

/// Runs \p sql in one IMMEDIATE transaction if the check made inside it
/// still finds \p from: another process may have done the same meanwhile.
/// Returns that check, or Ours once \p sql is committed.
SchemaCheck changeSchema(sqlite3 *db, SchemaCheck::Kind from,
                         const std::string &sql) {
  SchemaCheck failed;
  failed.kind = SchemaCheck::Failed;
  int rc = execute(db, "BEGIN IMMEDIATE");
  if (rc != SQLITE_OK) {
    failed.rc = rc;
    failed.detail = errorMessage(db, rc);
    return failed;
  }
  SchemaCheck c = checkSchema(db);
  if (c.kind != from) {
    execute(db, "ROLLBACK");
    return c;
  }
  rc = execute(db, sql.c_str());
  if (rc == SQLITE_OK)
    rc = execute(db, "COMMIT");
  if (rc != SQLITE_OK) {
    failed.rc = rc;
    failed.detail = errorMessage(db, rc);
    execute(db, "ROLLBACK");
    return failed;
  }
  c.kind = SchemaCheck::Ours;
  c.version = kSchemaVersion;
  return c;
}

} // namespace

SchemaCheck initializeSchema(sqlite3 *db) {
  return changeSchema(
      db, SchemaCheck::Empty,
      std::string(kCreateTables) +
          "PRAGMA application_id = " + std::to_string(kApplicationId) +
          ";\nPRAGMA user_version = " + std::to_string(kSchemaVersion) + ";");
}

SchemaCheck migrateSchema(sqlite3 *db) {
  // Older is version 1, the only older schema (checkSchema).
  return changeSchema(db, SchemaCheck::Older,
                      std::string(kMigrateFrom1) + "PRAGMA user_version = " +
                          std::to_string(kSchemaVersion) + ";");
}

std::string describe(const SchemaCheck &c) {
  switch (c.kind) {
  case SchemaCheck::Foreign:
    return "is a SQLite database of another application (" + c.detail + ")";
  case SchemaCheck::Newer:
    return "has schema version " + std::to_string(c.version) +
           ", newer than this lina's " + std::to_string(kSchemaVersion);
  case SchemaCheck::Older:
    return "has schema version " + std::to_string(c.version) +
           ", older than this lina's " + std::to_string(kSchemaVersion) +
           " (not migrated yet)";
  case SchemaCheck::Incomplete:
    return "has an incomplete schema (" + c.detail + ")";
  case SchemaCheck::Failed:
    return (isCorruption(c.rc) ? "is corrupt (" : "cannot be read (") +
           c.detail + ")";
  case SchemaCheck::Empty:
  case SchemaCheck::Ours:
    break;
  }
  return "is usable";
}

} // namespace lina::cache
