//===- Remove.cpp - clear, rm and prune --------------------------------===//
//
// Part of lina. Each removal is one IMMEDIATE transaction: another process's
// tune either lands before it (and a prune judges the entry with its new
// candidates) or after it.
//
//===----------------------------------------------------------------------===//
#include "CacheImpl.h"
#include "Sqlite.h"

#include <iterator>

namespace lina::cache {

namespace {

/// Deletes the entry \p key, a cubin or a tuning key with its candidates;
/// adds to \p removed when it was there. The SQLite result code.
int removeOne(sqlite3 *db, const std::string &key, int64_t &removed) {
  // Candidates explicitly: a connection without foreign keys (an older
  // SQLite's default) would leave them behind.
  const char *statements[] = {
      "DELETE FROM cubins WHERE key = ?1",
      "DELETE FROM candidates WHERE tuning_id IN (SELECT id FROM tunings "
      "WHERE key = ?1)",
      "DELETE FROM tunings WHERE key = ?1",
  };
  for (size_t i = 0; i < std::size(statements); ++i) {
    Statement s(db, statements[i]);
    s.bindText(1, key);
    int rc = s.run();
    if (rc != SQLITE_DONE)
      return rc;
    // Entries, not rows: the candidates go with their tuning key.
    if (i != 1)
      removed += sqlite3_changes(db);
  }
  return SQLITE_OK;
}

/// Gives the freed pages back to the file system; failing (e.g. a reader
/// holds the file) only leaves the file larger, so the result is ignored.
void shrink(Cache::Impl &impl) { execute(impl.db, "VACUUM"); }

} // namespace

bool Cache::clear() {
  if (!impl)
    return false;
  Impl::Locked locked(*impl);
  {
    Transaction tx(*impl, "clear the entries");
    if (!tx.ok())
      return false;
    int rc = execute(impl->db, "DELETE FROM candidates; DELETE FROM tunings; "
                               "DELETE FROM cubins");
    if (rc != SQLITE_OK)
      return tx.abort(rc);
    if (!tx.commit())
      return false;
  }
  shrink(*impl);
  return true;
}

bool Cache::removeEntries(const std::vector<std::string> &keys,
                          int64_t *removed) {
  if (!impl)
    return false;
  Impl::Locked locked(*impl);
  int64_t count = 0;
  {
    Transaction tx(*impl, "remove entries");
    if (!tx.ok())
      return false;
    for (const std::string &key : keys)
      if (int rc = removeOne(impl->db, key, count); rc != SQLITE_OK)
        return tx.abort(rc);
    if (!tx.commit())
      return false;
  }
  if (removed)
    *removed = count;
  return true;
}

bool Cache::removeOlderThan(int64_t cutoff, std::vector<CacheEntry> *removed) {
  if (!impl)
    return false;
  Impl::Locked locked(*impl);
  std::vector<CacheEntry> old;
  {
    Transaction tx(*impl, "prune the entries");
    if (!tx.ok())
      return false;
    // Judged inside the transaction: a tune that recorded a candidate
    // since the caller last looked keeps its entry.
    for (CacheEntry &e : readEntries(*impl))
      if (e.updatedAt < cutoff)
        old.push_back(std::move(e));
    int64_t count = 0;
    for (const CacheEntry &e : old)
      if (int rc = removeOne(impl->db, e.key, count); rc != SQLITE_OK)
        return tx.abort(rc);
    if (!tx.commit())
      return false;
  }
  if (!old.empty())
    shrink(*impl);
  if (removed)
    *removed = std::move(old);
  return true;
}

} // namespace lina::cache
