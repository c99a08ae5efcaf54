//===- Sqlite.h - Small RAII helpers over the SQLite C API ------*- C++ -*-===//
//
// Part of lina. Internal to LinaCache: a prepared statement that finalizes
// itself, and the result-code tests the cache makes.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_LIB_SQLITE_H
#define LINA_AUTOTUNE_LIB_SQLITE_H

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lina::cache {

/// True for the result codes that mean the file is not a sound database, as
/// opposed to a busy, full, read-only or missing one.
inline bool isCorruption(int rc) {
  int primary = rc & 0xff;
  return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB;
}

/// A prepared statement; finalized when it goes out of scope. Binding
/// indices start at 1 and columns at 0, as in SQLite.
class Statement {
public:
  Statement(sqlite3 *db, const char *sql);
  ~Statement();
  Statement(const Statement &) = delete;
  Statement &operator=(const Statement &) = delete;

  /// SQLITE_OK when prepared; otherwise the error.
  int prepareResult() const { return prepareRc; }
  bool prepared() const { return stmt != nullptr; }

  Statement &bind(int index, int64_t value);
  Statement &bind(int index, double value);
  Statement &bind(int index, std::optional<double> value);
  Statement &bindText(int index, std::string_view text);
  Statement &bindBlob(int index, std::string_view bytes);

  /// SQLITE_ROW, SQLITE_DONE or an error (the prepare error when it failed).
  int step();
  /// Steps once and expects SQLITE_DONE; returns the result code.
  int run();

  int64_t columnInt(int column);
  double columnDouble(int column);
  std::optional<double> columnOptionalDouble(int column);
  std::string columnText(int column);
  std::string columnBlob(int column);

private:
  sqlite3_stmt *stmt = nullptr;
  int prepareRc = SQLITE_OK;
};

/// Runs \p sql (one or more statements without results); the result code.
int execute(sqlite3 *db, const char *sql);

/// The single value of a one-row query such as "PRAGMA user_version", or the
/// error code in \p rc.
std::optional<int64_t> queryInt(sqlite3 *db, const char *sql, int *rc);
std::optional<std::string> queryText(sqlite3 *db, const char *sql, int *rc);

/// sqlite3_errmsg, or the generic text of \p rc when there is no connection.
std::string errorMessage(sqlite3 *db, int rc);

} // namespace lina::cache

#endif // LINA_AUTOTUNE_LIB_SQLITE_H
