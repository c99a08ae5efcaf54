//===- CacheSession.h - The cache as `lina cache` uses it -------*- C++ -*-===//
//
// Part of lina. The subcommands of `lina cache` open the cache quietly and
// print its warnings themselves: one that cannot do its work says why in
// one error line rather than a warning and an error, and none answers for
// a file it could not read or reports a write that lived only in memory.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TOOLS_CACHESESSION_H
#define LINA_TOOLS_CACHESESSION_H

#include "lina/Autotune/Cache.h"

#include <cstddef>
#include <string>

namespace lina::cli {

class CacheSession {
public:
  /// Opens the default cache without printing its warnings.
  CacheSession();

  cache::Cache db;

  /// Prints the warnings not printed yet to stderr.
  void printWarnings();
  /// Throws "cannot WHAT: REASON" unless what the cache holds is the file's:
  /// an empty stand-in for a file that could not be read (a newer lina's,
  /// an unusable location) would be described as if it were the cache.
  void needEntries(const std::string &what);
  /// Throws "FAILURE: REASON" when the file cannot take writes; the cache
  /// itself would carry on in memory, and the user would be told of a
  /// success that is gone when the command exits.
  void needWrites(const std::string &failure);
  /// After a write: throws "FAILURE: REASON" unless `ok` and the file took
  /// it (a write fault moves the cache into memory and says why).
  void needWritten(bool ok, const std::string &failure);

private:
  size_t shown = 0;
};

} // namespace lina::cli

#endif // LINA_TOOLS_CACHESESSION_H
