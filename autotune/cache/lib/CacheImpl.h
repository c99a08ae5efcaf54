//===- CacheImpl.h - The state behind lina::cache::Cache --------*- C++ -*-===//
//
// Part of lina. Internal to LinaCache: the connection, its mutex, the
// warnings, and the error handling the stores share.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_LIB_CACHEIMPL_H
#define LINA_AUTOTUNE_LIB_CACHEIMPL_H

#include "lina/Autotune/Cache.h"

#include <sqlite3.h>

#include <mutex>
#include <set>
#include <string>
#include <sys/types.h>
#include <vector>

namespace lina::cache {

struct Cache::Impl {
  /// Joins the caches checkpointed at exit (Checkpoint.cpp).
  explicit Impl(CacheOptions options);
  ~Impl();

  CacheOptions options;
  /// The process that made it: a forked child must not use the parent's
  /// connection, not even at exit.
  pid_t owner = 0;
  std::mutex mutex;
  sqlite3 *db = nullptr;
  /// The file asked for ("" for openInMemory()).
  std::string filePath;
  bool inMemory = false;
  /// Cache::notSavedReason() and Cache::holdsFileEntries().
  std::string notSaved;
  bool fileEntries = false;
  std::vector<std::string> warnings;
  /// Primary result codes already warned about: a full disk during a tune
  /// gives one warning, not one per candidate.
  std::set<int> warnedCodes;
  /// Candidate rows best() has warned about skipping: once each, although
  /// every kernel load looks them up.
  std::set<std::string> warnedRows;
  /// Set when a statement reports corruption; acted on by Locked's
  /// destructor, once the statements that saw it are finalized.
  std::string corruption;
  /// Set (to the warning's start) when the file could not take a write:
  /// disk full, I/O error, read-only, locked past the busy timeout, deleted
  /// or replaced. Acted on by fallBackIfNeeded().
  std::string writeFault;
  /// The file open() judged usable, so recovery can tell whether another
  /// process has replaced it since.
  dev_t device = 0;
  ino_t inode = 0;

  /// Records (and unless silenced prints) "lina: warning: <message>".
  void warn(const std::string &message);
  /// Handles a failed SQLite call made while trying to \p action: corruption
  /// schedules a rebuild; anything else is warned about once per code.
  void fail(int rc, const std::string &action);
  /// As fail(), for a failed write: when the file cannot take writes the
  /// fault is recorded (writeFault) instead, without a warning yet.
  void failWrite(int rc, const std::string &action);
  /// True when the database file was deleted, renamed or replaced since it
  /// was opened: writes to it would be lost with the process.
  bool fileMoved();
  /// Moves the cache into memory with a copy of what the file holds, so
  /// that this process keeps every entry; warns \p why once. The file is
  /// not touched again.
  void fallBackToMemory(const std::string &why);
  /// Acts on writeFault; true when it moved the cache into memory.
  bool fallBackIfNeeded();
  /// Runs \p attempt (one write in its own Transaction; true on success)
  /// and, when the file could not take it, runs it again in memory after
  /// fallBackIfNeeded(): the caller's entry is kept for this process.
  template <typename F> bool retryInMemory(F attempt) {
    bool ok = attempt();
    if (ok || !fallBackIfNeeded())
      return ok;
    return attempt();
  }

  /// Opens \p path, replacing an unusable file or falling back to memory.
  /// \p note, when set, is a warning to give once the outcome is known (the
  /// rebuild after corruption found mid-session), so one event is one line.
  void openFile(const std::string &path, std::string note = "");
  /// Opens an in-memory database; warns \p why first unless it is empty.
  void openMemory(const std::string &why);
  void close();
  /// Copies every committed page from the WAL into the database file and
  /// empties the WAL, so that the file alone holds the cache. Best effort:
  /// another process's open transaction may keep it from finishing, which
  /// that process's own checkpoint then does.
  void checkpoint();
  /// Moves the file aside and starts a new one after fail() saw corruption.
  void recoverIfNeeded();
  /// The path for messages: the file, or ":memory:".
  std::string where() const { return inMemory ? ":memory:" : filePath; }

  /// Holds the mutex for one public call and recovers from corruption that
  /// the call met, after the call's statements are gone.
  class Locked {
  public:
    explicit Locked(Impl &impl) : impl(impl), lock(impl.mutex) {}
    ~Locked() {
      impl.recoverIfNeeded();
      impl.fallBackIfNeeded();
    }

  private:
    Impl &impl;
    std::lock_guard<std::mutex> lock;
  };
};

/// An IMMEDIATE transaction: it takes the write lock up front, so a writer
/// waits in the busy handler instead of failing when another process
/// commits between its read and its write (SQLITE_BUSY_SNAPSHOT in WAL
/// mode). Rolled back unless committed.
class Transaction {
public:
  Transaction(Cache::Impl &impl, std::string action);
  ~Transaction();
  bool ok() const { return active; }
  /// Reports \p rc through Cache::Impl::fail and rolls back; returns false.
  bool abort(int rc);
  bool commit();

private:
  Cache::Impl &impl;
  std::string action;
  bool active = false;
};

/// Why a stored candidate could not have been recorded ("" when it could):
/// a time that is not a finite number >= 0, a schedule number below 1, or
/// what \p check (when set) says of its schedule. Shared by import (which
/// refuses the file) and best() (which skips the row).
std::string candidateProblem(const Schedule &schedule,
                             std::optional<double> timeMs,
                             const ScheduleCheck &check);

/// Every entry, as Cache::listEntries() gives them; the caller holds the
/// lock (Inspect.cpp).
std::vector<CacheEntry> readEntries(Cache::Impl &impl);

/// Every candidate of the tuning key \p digest, ordered as
/// Cache::candidates(); the caller holds the lock (TuningStore.cpp).
std::vector<Candidate> readCandidates(Cache::Impl &impl,
                                      const std::string &digest);

/// Unix seconds now.
int64_t unixNow();
/// "2025-01-02 10:11:12 UTC".
std::string formatTime(int64_t unixSeconds);

} // namespace lina::cache

#endif // LINA_AUTOTUNE_LIB_CACHEIMPL_H
