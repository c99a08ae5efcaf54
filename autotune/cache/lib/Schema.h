//===- Schema.h - The cache's tables and how a file is judged ---*- C++ -*-===//
//
// Part of lina. Internal to LinaCache: the schema (version kSchemaVersion),
// and the checks that decide whether a file is a usable lina cache, used both
// when opening the cache and when importing a file into it.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_LIB_SCHEMA_H
#define LINA_AUTOTUNE_LIB_SCHEMA_H

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <sys/types.h>

namespace lina::cache {

/// What the first 100 bytes and the size of a file say, read before SQLite
/// touches it: SQLite reports a foreign or short file only lazily, and a
/// truncated one not at all until a query reaches a missing page.
struct FileCheck {
  bool exists = false;
  /// Could not be examined (e.g. not readable, not a regular file): a
  /// reason to fall back, not to move the file aside. Empty when fine.
  std::string error;
  /// Not a SQLite file at all: the reason, else empty.
  std::string notSqlite;
  /// The header promises more pages than the file holds. Only a suspicion:
  /// a concurrent checkpoint may be extending the file, so it is confirmed
  /// with PRAGMA quick_check before the file is moved aside.
  bool maybeTruncated = false;
  int64_t size = 0;
  int64_t expectedSize = 0;
  /// Identifies the file checked, so that the move aside can tell whether
  /// another process has already replaced it.
  dev_t device = 0;
  ino_t inode = 0;
};

FileCheck checkFile(const std::string &path);

/// What the tables and pragmas of an open database say.
struct SchemaCheck {
  enum Kind {
    Empty,      ///< a new database: no tables, no application id
    Ours,       ///< a lina cache of this schema
    Foreign,    ///< another application's database
    Newer,      ///< a lina cache of a newer schema
    Older,      ///< a complete lina cache of schema 1: migrateSchema()
    Incomplete, ///< our ids, but a table or column is missing
    Failed,     ///< a query failed: rc says why
  };
  Kind kind = Failed;
  int rc = SQLITE_OK;
  int64_t version = 0;
  /// For Foreign and Incomplete: what was found; for Failed: the message.
  std::string detail;
};

SchemaCheck checkSchema(sqlite3 *db);

/// Creates the tables and sets the ids in one IMMEDIATE transaction, after
/// checking again inside it that the database is still empty (another
/// process may have created it meanwhile). Returns the check made inside the
/// transaction, Ours on success.
SchemaCheck initializeSchema(sqlite3 *db);

/// Brings an Older database to this schema in one IMMEDIATE transaction,
/// after checking again inside it that it is still Older (another process
/// may have migrated it meanwhile). What it held stays; the added columns
/// take their defaults. Returns the check made inside the transaction, Ours
/// on success.
SchemaCheck migrateSchema(sqlite3 *db);

/// Why a SchemaCheck that is neither Empty nor Ours makes a file unusable,
/// as the end of a sentence that starts with the file name, e.g. "is a
/// SQLite database of another application (tables: users)".
std::string describe(const SchemaCheck &check);

} // namespace lina::cache

#endif // LINA_AUTOTUNE_LIB_SCHEMA_H
