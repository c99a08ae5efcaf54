//===- Cache.cpp - Opening the cache, recovery and fallback ------------===//
//
// Part of lina. Whatever the file at the cache path holds, opening ends in a
// working cache: a usable file is used; an unusable one is moved aside and
// replaced; when no file can be used the cache lives in memory.
//
//===----------------------------------------------------------------------===//
#include "CacheImpl.h"
#include "Schema.h"
#include "Sqlite.h"

#include "lina/Autotune/CacheLocation.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace lina::cache {

namespace {

enum class Verdict {
  Usable,     ///< opened and checked
  Unusable,   ///< the file is not a lina cache of this schema: replace it
  Unopenable, ///< the location cannot be used: fall back to memory
  ReadOnly,   ///< a sound cache that may not be written: copy it to memory
  Newer,      ///< a newer lina's cache: leave it alone, use none
};

struct Attempt {
  Verdict verdict = Verdict::Unopenable;
  std::string reason;
  sqlite3 *db = nullptr;
  dev_t device = 0;
  ino_t inode = 0;
};

Attempt give(Attempt a, Verdict verdict, std::string reason) {
  sqlite3_close_v2(a.db);
  a.db = nullptr;
  a.verdict = verdict;
  a.reason = std::move(reason);
  return a;
}

/// A newer lina's cache: closed without the checkpoint SQLite makes when
/// the last connection closes, so that not even a running newer lina's WAL
/// is folded into the file by this one.
Attempt giveNewer(Attempt a, const SchemaCheck &schema) {
  sqlite3_db_config(a.db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
  return give(std::move(a), Verdict::Newer,
              "schema " + std::to_string(schema.version) + " > " +
                  std::to_string(kSchemaVersion));
}

/// Unusable when \p rc is corruption, else Unopenable.
Attempt giveError(Attempt a, int rc, const std::string &what) {
  std::string message = errorMessage(a.db, rc);
  if (isCorruption(rc))
    return give(std::move(a), Verdict::Unusable,
                "is corrupt (" + message + ")");
  return give(std::move(a), Verdict::Unopenable, what + ": " + message);
}

/// Switches to WAL unless the file is in WAL mode already. The switch needs
/// an exclusive lock and SQLite does not wait for it in its busy handler
/// (several processes opening a new file all try it at once), so it is
/// retried here for up to \p timeoutMs.
std::optional<std::string> enableWal(sqlite3 *db, int timeoutMs, int *rc) {
  std::optional<std::string> mode = queryText(db, "PRAGMA journal_mode", rc);
  if (mode && *mode == "wal")
    return mode;
  auto start = std::chrono::steady_clock::now();
  for (int sleepMs = 1;; sleepMs = std::min(sleepMs * 2, 50)) {
    mode = queryText(db, "PRAGMA journal_mode = WAL", rc);
    if (mode || (*rc & 0xff) != SQLITE_BUSY)
      return mode;
    auto waited = std::chrono::steady_clock::now() - start;
    if (waited > std::chrono::milliseconds(timeoutMs))
      return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(sleepMs));
  }
}

/// Why the OS would not let this process create or write \p path, e.g.
/// "Permission denied on /dir" when the directory may not be written; ""
/// when nothing is in the way. SQLite's "unable to open database file"
/// names no cause, and its saved errno is that of its last attempt (a
/// read-only retry: "No such file or directory"), not of the refusal.
std::string accessProblem(const std::string &path) {
  if (::access(path.c_str(), F_OK) != 0) {
    if (errno != ENOENT)
      return std::strerror(errno);
    size_t slash = path.rfind('/');
    std::string dir = slash == std::string::npos ? "."
                      : slash == 0               ? "/"
                                                 : path.substr(0, slash);
    if (::access(dir.c_str(), W_OK | X_OK) != 0)
      return std::string(std::strerror(errno)) + " on " + dir;
    return "";
  }
  if (::access(path.c_str(), R_OK | W_OK) != 0)
    return std::strerror(errno);
  return "";
}

Attempt tryOpen(const std::string &path, const CacheOptions &options) {
  Attempt a;
  FileCheck file = checkFile(path);
  if (!file.error.empty())
    return give(std::move(a), Verdict::Unopenable, file.error);
  a.device = file.device;
  a.inode = file.inode;
  if (!file.notSqlite.empty())
    return give(std::move(a), Verdict::Unusable, file.notSqlite);

  int rc = sqlite3_open_v2(path.c_str(), &a.db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = errorMessage(a.db, rc);
    std::string cause = accessProblem(path);
    if (!cause.empty())
      message += ": " + cause;
    return give(std::move(a), Verdict::Unopenable, message);
  }
  sqlite3_busy_timeout(a.db, options.busyTimeoutMs);
  // SQLite quietly opens a file it may not write read-only; every write
  // would then fail. A sound one is still worth reading: its entries are
  // copied into memory (a shared cache on a read-only mount keeps serving).
  if (sqlite3_db_readonly(a.db, "main") == 1) {
    SchemaCheck schema = checkSchema(a.db);
    if (schema.kind == SchemaCheck::Newer)
      return giveNewer(std::move(a), schema);
    // An older schema is migrated in the in-memory copy.
    if (schema.kind != SchemaCheck::Ours && schema.kind != SchemaCheck::Older) {
      // E.g. a WAL file in a read-only directory: SQLite cannot make the
      // shared-memory file it needs to read it.
      std::string cause = accessProblem(path);
      return give(std::move(a), Verdict::Unopenable,
                  "the file is read-only and " + describe(schema) +
                      (cause.empty() ? "" : "; " + cause));
    }
    a.verdict = Verdict::ReadOnly;
    return a;
  }

  // SQLite itself calls a file shorter than its header says corrupt; name
  // the more useful cause when the header check saw it.
  std::string truncated = "is truncated (" + std::to_string(file.size) +
                          " of " + std::to_string(file.expectedSize) +
                          " bytes)";
  SchemaCheck schema = checkSchema(a.db);
  if (schema.kind == SchemaCheck::Empty)
    schema = initializeSchema(a.db);
  // An older lina's cache keeps its entries: the migration only adds
  // columns. Afterwards that lina finds a newer schema and leaves the file
  // alone, as it does any newer lina's.
  if (schema.kind == SchemaCheck::Older)
    schema = migrateSchema(a.db);
  // Checked before anything writes (initializeSchema and migrateSchema
  // write only to an empty or an older file): a newer lina's cache is not
  // ours to change, not even its journal mode, nor to move aside, which
  // would make two lina versions sharing a directory evict each other's
  // cache.
  if (schema.kind == SchemaCheck::Newer)
    return giveNewer(std::move(a), schema);
  if (schema.kind == SchemaCheck::Failed) {
    if (isCorruption(schema.rc) && file.maybeTruncated)
      return give(std::move(a), Verdict::Unusable, truncated);
    return giveError(std::move(a), schema.rc, "cannot read it");
  }
  if (schema.kind != SchemaCheck::Ours)
    return give(std::move(a), Verdict::Unusable, describe(schema));

  // Confirm a suspected truncation before acting on it. A check that cannot
  // run (e.g. busy past the timeout) proves nothing; the file is then used,
  // and real damage is still caught when a query meets it (fail()).
  if (file.maybeTruncated) {
    std::optional<std::string> result =
        queryText(a.db, "PRAGMA quick_check(1)", &rc);
    if ((result && *result != "ok") || (!result && isCorruption(rc)))
      return give(std::move(a), Verdict::Unusable, truncated);
  }

  // WAL lets readers run while a tune writes, and a killed writer's
  // uncommitted frames are simply ignored on the next open. A file system
  // without shared memory refuses WAL and keeps the rollback journal, which
  // is slower under concurrency but equally safe, so that is not an error.
  std::optional<std::string> mode = enableWal(a.db, options.busyTimeoutMs, &rc);
  if (!mode)
    return giveError(std::move(a), rc, "cannot set its journal mode");
  // NORMAL in WAL mode loses no committed transaction when a process dies,
  // only on power loss, and saves an fsync per candidate.
  execute(a.db, "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON");

  struct stat st;
  if (stat(path.c_str(), &st) == 0) {
    a.device = st.st_dev;
    a.inode = st.st_ino;
  }
  a.verdict = Verdict::Usable;
  return a;
}

struct MoveResult {
  std::string aside;
  std::string error;
  /// The file is no longer the one judged unusable: another process moved
  /// it aside first (and perhaps made a new one).
  bool replaced = false;
};

bool exists(const std::string &path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

/// Renames \p path to <path>.corrupt-<UTC time>, with the WAL and rollback
/// journal that belong to it: left in place, they would be replayed into
/// the new database.
MoveResult moveAside(const std::string &path, dev_t device, ino_t inode) {
  MoveResult m;
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT)
      m.replaced = true;
    else
      m.error = std::strerror(errno);
    return m;
  }
  if (st.st_dev != device || st.st_ino != inode) {
    m.replaced = true;
    return m;
  }
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  std::string base = path + ".corrupt-" + stamp;
  m.aside = base;
  for (int i = 1; exists(m.aside) && i < 1000; ++i)
    m.aside = base + "-" + std::to_string(i);
  if (std::rename(path.c_str(), m.aside.c_str()) != 0) {
    m.error = std::strerror(errno);
    m.aside.clear();
    return m;
  }
  for (const char *suffix : {"-wal", "-journal"}) {
    std::string from = path + suffix;
    if (exists(from) && std::rename(from.c_str(), (m.aside + suffix).c_str()))
      ::unlink(from.c_str());
  }
  // The shared-memory index is rebuilt from the WAL; it holds no data.
  ::unlink((path + "-shm").c_str());
  return m;
}

} // namespace

//===----------------------------------------------------------------------===//
// Cache::Impl
//===----------------------------------------------------------------------===//

void Cache::Impl::warn(const std::string &message) {
  std::string line = "lina: warning: " + message;
  warnings.push_back(line);
  if (options.printWarnings)
    std::fprintf(stderr, "%s\n", line.c_str());
}

void Cache::Impl::fail(int rc, const std::string &action) {
  if (isCorruption(rc) && !inMemory) {
    if (corruption.empty())
      corruption = "is corrupt (" + errorMessage(db, rc) + ")";
    return;
  }
  if (!warnedCodes.insert(rc & 0xff).second)
    return;
  std::string message = "could not " + action + " in the cache " + where() +
                        ": " + errorMessage(db, rc);
  if ((rc & 0xff) == SQLITE_BUSY)
    message += " (another process held it for over " +
               std::to_string(options.busyTimeoutMs) + " ms)";
  warn(message);
}

static bool isWriteFault(int rc) {
  switch (rc & 0xff) {
  case SQLITE_FULL:
  case SQLITE_IOERR:
  case SQLITE_READONLY:
  case SQLITE_CANTOPEN:
  case SQLITE_BUSY:
  case SQLITE_PERM:
    return true;
  }
  return false;
}

void Cache::Impl::failWrite(int rc, const std::string &action) {
  if (inMemory || !isWriteFault(rc))
    return fail(rc, action);
  if (!writeFault.empty())
    return;
  writeFault = "could not " + action + " in the cache " + filePath + " (" +
               errorMessage(db, rc);
  if ((rc & 0xff) == SQLITE_BUSY)
    writeFault += ": another process held it for over " +
                  std::to_string(options.busyTimeoutMs) + " ms";
  writeFault += ")";
}

bool Cache::Impl::fileMoved() {
  int moved = 0;
  return db && !inMemory &&
         sqlite3_file_control(db, "main", SQLITE_FCNTL_HAS_MOVED, &moved) ==
             SQLITE_OK &&
         moved;
}

void Cache::Impl::fallBackToMemory(const std::string &why) {
  // The backup API copies a consistent snapshot; it only reads the file,
  // which works when writing does not (full disk, read-only, locked by a
  // writer in WAL mode, unlinked but still open).
  sqlite3 *memory = nullptr;
  int rc = sqlite3_open(":memory:", &memory);
  if (rc == SQLITE_OK) {
    sqlite3_backup *backup = sqlite3_backup_init(memory, "main", db, "main");
    rc = backup ? sqlite3_backup_step(backup, -1) : sqlite3_errcode(memory);
    int finished = sqlite3_backup_finish(backup);
    if (rc == SQLITE_DONE)
      rc = finished;
  }
  // A read-only older cache is migrated here, in the copy.
  if (rc == SQLITE_OK && checkSchema(memory).kind == SchemaCheck::Older)
    migrateSchema(memory);
  if (rc != SQLITE_OK || checkSchema(memory).kind != SchemaCheck::Ours) {
    sqlite3_close_v2(memory);
    openMemory(why + " and its entries could not be copied (" +
               sqlite3_errstr(rc) + ")");
    return;
  }
  close();
  db = memory;
  inMemory = true;
  notSaved = why;
  fileEntries = true;
  execute(db, "PRAGMA foreign_keys = ON");
  warn(why +
       "; using an in-memory copy of it for the rest of this process "
       "(new entries will not be saved to " +
       filePath + ")");
}

bool Cache::Impl::fallBackIfNeeded() {
  if (writeFault.empty())
    return false;
  std::string why = std::move(writeFault);
  writeFault.clear();
  if (!inMemory)
    fallBackToMemory(why);
  return true;
}

void Cache::Impl::close() {
  sqlite3_close_v2(db);
  db = nullptr;
}

void Cache::Impl::openMemory(const std::string &why) {
  close();
  inMemory = true;
  notSaved = why;
  fileEntries = false;
  if (!why.empty())
    warn(why + "; using an in-memory cache for this process (nothing will "
               "be saved)");
  if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
      initializeSchema(db).kind != SchemaCheck::Ours) {
    // Only an allocation failure gets here; every call then reports a miss.
    warn("cannot create an in-memory cache: " + errorMessage(db, SQLITE_NOMEM));
    close();
    return;
  }
  execute(db, "PRAGMA foreign_keys = ON");
}

void Cache::Impl::openFile(const std::string &path, std::string note) {
  close();
  filePath = path;
  inMemory = false;
  // Two rounds cover the usual case (move aside, create anew); the third is
  // for a race in which another process replaced the file in between.
  for (int round = 0; round < 3; ++round) {
    Attempt a = tryOpen(path, options);
    if (a.verdict == Verdict::Usable) {
      db = a.db;
      device = a.device;
      inode = a.inode;
      notSaved.clear();
      fileEntries = true;
      if (!note.empty())
        warn(note);
      return;
    }
    if (a.verdict == Verdict::ReadOnly) {
      db = a.db;
      // SQLite does not say why; the permissions or the mount usually do.
      std::string why = note.empty() ? "the cache " + path + " is read-only"
                                     : note + ", but the new file is read-only";
      std::string cause = accessProblem(path);
      if (!cause.empty())
        why += " (" + cause + ")";
      fallBackToMemory(why);
      return;
    }
    if (a.verdict == Verdict::Newer) {
      if (!note.empty())
        warn(note);
      openMemory("");
      std::string newer =
          "the cache " + path + " was written by a newer lina (" + a.reason + ")";
      notSaved = newer + " and is left untouched; set LINA_CACHE_DIR to use "
                         "a separate cache";
      warn(newer + ": it is left untouched; cubins and tuning results of this "
                   "run are not saved; set LINA_CACHE_DIR to use a separate "
                   "cache");
      return;
    }
    if (a.verdict == Verdict::Unopenable) {
      openMemory(note.empty()
                     ? "cannot open the cache " + path + " (" + a.reason + ")"
                     : note + ", but the new file cannot be opened (" +
                           a.reason + ")");
      return;
    }
    if (!note.empty()) {
      openMemory(note + ", but the new file is unusable too (it " + a.reason +
                 ")");
      return;
    }
    MoveResult moved = moveAside(path, a.device, a.inode);
    if (!moved.error.empty()) {
      openMemory("the cache " + path + " " + a.reason +
                 " and cannot be moved aside (" + moved.error + ")");
      return;
    }
    if (moved.replaced)
      continue;
    note = "the cache " + path + " " + a.reason + "; moved it to " +
           moved.aside + " and started a new one";
  }
  openMemory(note.empty() ? "the cache " + path + " keeps being replaced"
                          : note);
}

void Cache::Impl::recoverIfNeeded() {
  if (corruption.empty())
    return;
  std::string reason = std::move(corruption);
  corruption.clear();
  close();
  MoveResult moved = moveAside(filePath, device, inode);
  if (!moved.error.empty()) {
    openMemory("the cache " + filePath + " " + reason +
               " and cannot be moved aside (" + moved.error + ")");
    return;
  }
  if (moved.replaced) {
    openFile(filePath);
    return;
  }
  openFile(filePath, "the cache " + filePath + " " + reason + "; moved it to " +
                         moved.aside + " and started a new one");
}

//===----------------------------------------------------------------------===//
// Transaction and time helpers
//===----------------------------------------------------------------------===//

Transaction::Transaction(Cache::Impl &impl, std::string action)
    : impl(impl), action(std::move(action)) {
  if (!impl.db)
    return;
  // A deleted or replaced file would swallow this write without an error.
  if (impl.fileMoved()) {
    if (impl.writeFault.empty())
      impl.writeFault = "the cache " + impl.filePath +
                        " was deleted or replaced while this process used it";
    return;
  }
  int rc = execute(impl.db, "BEGIN IMMEDIATE");
  if (rc == SQLITE_OK)
    active = true;
  else
    impl.failWrite(rc, this->action);
}

Transaction::~Transaction() {
  if (active)
    execute(impl.db, "ROLLBACK");
}

bool Transaction::abort(int rc) {
  impl.failWrite(rc, action);
  if (active)
    execute(impl.db, "ROLLBACK");
  active = false;
  return false;
}

bool Transaction::commit() {
  if (!active)
    return false;
  int rc = execute(impl.db, "COMMIT");
  if (rc != SQLITE_OK)
    return abort(rc);
  active = false;
  return true;
}

int64_t unixNow() { return static_cast<int64_t>(std::time(nullptr)); }

std::string formatTime(int64_t unixSeconds) {
  std::time_t t = static_cast<std::time_t>(unixSeconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

//===----------------------------------------------------------------------===//
// Cache
//===----------------------------------------------------------------------===//

Cache::Cache(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
Cache::Cache(Cache &&) noexcept = default;
Cache &Cache::operator=(Cache &&) noexcept = default;
Cache::~Cache() = default;

Cache Cache::open(const std::string &path, CacheOptions options) {
  auto impl = std::make_unique<Impl>(options);
  impl->openFile(path);
  return Cache(std::move(impl));
}

Cache Cache::openDefault(CacheOptions options) {
  auto impl = std::make_unique<Impl>(options);
  CacheLocation location = findCacheLocation();
  if (location.ok())
    impl->openFile(location.path);
  else if (location.directory.empty())
    impl->openMemory(location.error);
  else
    impl->openMemory("cannot use the cache directory " + location.directory +
                     " (" + location.error + ")");
  return Cache(std::move(impl));
}

Cache Cache::openInMemory(CacheOptions options) {
  auto impl = std::make_unique<Impl>(options);
  impl->openMemory("");
  return Cache(std::move(impl));
}

std::string Cache::path() const {
  if (!impl)
    return "";
  std::lock_guard<std::mutex> lock(impl->mutex);
  return impl->where();
}

bool Cache::isInMemory() const {
  if (!impl)
    return true;
  std::lock_guard<std::mutex> lock(impl->mutex);
  return impl->inMemory;
}

std::string Cache::notSavedReason() const {
  if (!impl)
    return "";
  std::lock_guard<std::mutex> lock(impl->mutex);
  return impl->notSaved;
}

bool Cache::holdsFileEntries() const {
  if (!impl)
    return false;
  std::lock_guard<std::mutex> lock(impl->mutex);
  return impl->fileEntries;
}

std::vector<std::string> Cache::warnings() const {
  if (!impl)
    return {};
  std::lock_guard<std::mutex> lock(impl->mutex);
  return impl->warnings;
}

} // namespace lina::cache
