//===- Sqlite.cpp - Small RAII helpers over the SQLite C API -----------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "Sqlite.h"

namespace lina::cache {

Statement::Statement(sqlite3 *db, const char *sql) {
  prepareRc =
      db ? sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr) : SQLITE_MISUSE;
  if (prepareRc != SQLITE_OK) {
    sqlite3_finalize(stmt);
    stmt = nullptr;
  }
}

Statement::~Statement() { sqlite3_finalize(stmt); }

Statement &Statement::bind(int index, int64_t value) {
  if (stmt)
    sqlite3_bind_int64(stmt, index, value);
  return *this;
}

Statement &Statement::bind(int index, double value) {
  if (stmt)
    sqlite3_bind_double(stmt, index, value);
  return *this;
}

Statement &Statement::bind(int index, std::optional<double> value) {
  if (!value) {
    if (stmt)
      sqlite3_bind_null(stmt, index);
    return *this;
  }
  return bind(index, *value);
}

Statement &Statement::bindText(int index, std::string_view text) {
  if (stmt)
    sqlite3_bind_text64(stmt, index, text.data(), text.size(), SQLITE_TRANSIENT,
                        SQLITE_UTF8);
  return *this;
}

Statement &Statement::bindBlob(int index, std::string_view bytes) {
  // A zero-length blob must still be a blob, not NULL: bind_blob64 with a
  // null pointer would store NULL and break the NOT NULL constraint.
  static const char kEmpty = 0;
  if (stmt)
    sqlite3_bind_blob64(stmt, index, bytes.empty() ? &kEmpty : bytes.data(),
                        bytes.size(), SQLITE_TRANSIENT);
  return *this;
}

int Statement::step() { return stmt ? sqlite3_step(stmt) : prepareRc; }

int Statement::run() {
  int rc = step();
  return rc == SQLITE_ROW ? SQLITE_DONE : rc;
}

int64_t Statement::columnInt(int column) {
  return sqlite3_column_int64(stmt, column);
}

double Statement::columnDouble(int column) {
  return sqlite3_column_double(stmt, column);
}

std::optional<double> Statement::columnOptionalDouble(int column) {
  if (sqlite3_column_type(stmt, column) == SQLITE_NULL)
    return std::nullopt;
  return sqlite3_column_double(stmt, column);
}

std::string Statement::columnText(int column) {
  const auto *p = sqlite3_column_text(stmt, column);
  int n = sqlite3_column_bytes(stmt, column);
  return p ? std::string(reinterpret_cast<const char *>(p), n) : std::string();
}

std::string Statement::columnBlob(int column) {
  const void *p = sqlite3_column_blob(stmt, column);
  int n = sqlite3_column_bytes(stmt, column);
  return p ? std::string(static_cast<const char *>(p), n) : std::string();
}

int execute(sqlite3 *db, const char *sql) {
  return db ? sqlite3_exec(db, sql, nullptr, nullptr, nullptr) : SQLITE_MISUSE;
}

std::optional<int64_t> queryInt(sqlite3 *db, const char *sql, int *rc) {
  Statement s(db, sql);
  *rc = s.step();
  if (*rc != SQLITE_ROW)
    return std::nullopt;
  *rc = SQLITE_OK;
  return s.columnInt(0);
}

std::optional<std::string> queryText(sqlite3 *db, const char *sql, int *rc) {
  Statement s(db, sql);
  *rc = s.step();
  if (*rc != SQLITE_ROW)
    return std::nullopt;
  *rc = SQLITE_OK;
  return s.columnText(0);
}

std::string errorMessage(sqlite3 *db, int rc) {
  if (db && sqlite3_errcode(db) != SQLITE_OK)
    return sqlite3_errmsg(db);
  return sqlite3_errstr(rc);
}

} // namespace lina::cache
