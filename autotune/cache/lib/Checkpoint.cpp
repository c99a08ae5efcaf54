//===- Checkpoint.cpp - The database file alone holds the cache --------===//
//
// Part of lina. In WAL mode a commit lands in <file>-wal; SQLite copies it
// into the database file only at a checkpoint (every 1000 pages, and when
// the last connection closes). The process-wide cache (processCache()) is
// never closed, so without more a tune's results would stay in the WAL
// after lina exits, and a copy of lina.db alone (what a backup or a move
// to another machine takes) would hold none of them. Every cache still
// open at exit is therefore checkpointed, and so is the cache an export
// reads.
//
//===----------------------------------------------------------------------===//
#include "CacheImpl.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <unistd.h>

namespace lina::cache {

namespace {

/// The caches alive in this process. Never destroyed: the exit handler may
/// run after static destructors.
struct OpenCaches {
  std::mutex mutex;
  std::set<Cache::Impl *> impls;
};

OpenCaches &openCaches() {
  static OpenCaches *open = new OpenCaches;
  return *open;
}

/// At most this long at exit for a cache that another thread is using, and
/// for other processes' readers to let the WAL be emptied: exit must not
/// hang on a busy cache.
constexpr auto kExitWait = std::chrono::seconds(1);

void checkpointAtExit() {
  OpenCaches &open = openCaches();
  std::lock_guard<std::mutex> registry(open.mutex);
  for (Cache::Impl *impl : open.impls) {
    if (impl->owner != getpid())
      continue;
    // A thread still inside a call holds the lock (its own constructor and
    // destructor never take it while holding the registry's, so waiting
    // cannot deadlock); it is given a moment and then left alone.
    std::unique_lock<std::mutex> lock(impl->mutex, std::defer_lock);
    auto deadline = std::chrono::steady_clock::now() + kExitWait;
    while (!lock.try_lock() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (!lock.owns_lock() || !impl->db)
      continue;
    sqlite3_busy_timeout(
        impl->db,
        std::min<int>(impl->options.busyTimeoutMs,
                      std::chrono::milliseconds(kExitWait).count()));
    impl->checkpoint();
    sqlite3_busy_timeout(impl->db, impl->options.busyTimeoutMs);
  }
}

} // namespace

Cache::Impl::Impl(CacheOptions options) : options(options), owner(getpid()) {
  OpenCaches &open = openCaches();
  std::lock_guard<std::mutex> registry(open.mutex);
  static bool handlerInstalled = false;
  if (!handlerInstalled)
    handlerInstalled = std::atexit(checkpointAtExit) == 0;
  open.impls.insert(this);
}

Cache::Impl::~Impl() {
  {
    OpenCaches &open = openCaches();
    std::lock_guard<std::mutex> registry(open.mutex);
    open.impls.erase(this);
  }
  // Closing the last connection checkpoints by itself.
  close();
}

void Cache::Impl::checkpoint() {
  if (!db || inMemory)
    return;
  // TRUNCATE rather than PASSIVE: the WAL is left empty, not merely
  // copied, so nothing but the database file holds an entry. Its result is
  // not acted on: a checkpoint kept from finishing loses nothing.
  sqlite3_wal_checkpoint_v2(db, "main", SQLITE_CHECKPOINT_TRUNCATE, nullptr,
                            nullptr);
}

} // namespace lina::cache
