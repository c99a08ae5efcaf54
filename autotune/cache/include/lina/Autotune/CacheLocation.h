//===- CacheLocation.h - Where the cache database lives ---------*- C++ -*-===//
//
// Part of lina. One SQLite file per user: $LINA_CACHE_DIR/lina.db, else
// $XDG_CACHE_HOME/lina/lina.db, else ~/.cache/lina/lina.db.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_CACHELOCATION_H
#define LINA_AUTOTUNE_CACHELOCATION_H

#include <string>

namespace lina::cache {

/// The database file name inside the cache directory.
inline constexpr const char *kDatabaseFileName = "lina.db";

struct CacheLocation {
  /// The directory, without a trailing slash.
  std::string directory;
  /// directory + "/lina.db"; set even when the directory could not be made.
  std::string path;
  /// Empty when the directory exists (or was created); otherwise why it
  /// cannot be used, e.g. "LINA_CACHE_DIR=/x is not a directory".
  std::string error;

  bool ok() const { return error.empty(); }
};

/// The directory from the environment, without touching the file system.
/// An empty variable counts as unset (as the XDG spec asks); a relative
/// XDG_CACHE_HOME is ignored (the XDG spec says so), a relative
/// LINA_CACHE_DIR is taken as given since the user asked for it by name.
std::string cacheDirectoryFromEnvironment();

/// Resolves the location and creates the directory (and its missing parents)
/// with mode 0700: the cache holds machine code that lina loads and runs, so
/// other users must not be able to plant a cubin in it.
CacheLocation findCacheLocation();

/// mkdir -p with mode \p mode for the directories it creates. Returns "" on
/// success (including when \p dir already is a directory), else the reason.
std::string makeDirectories(const std::string &dir, unsigned mode = 0700);

} // namespace lina::cache

#endif // LINA_AUTOTUNE_CACHELOCATION_H
