//===- FaultVfs.h - A SQLite VFS that injects disk faults -------*- C++ -*-===//
//
// Part of lina. The faults a disk gives (full, I/O error, read-only) cannot
// be produced reliably in a test: root ignores permissions, and filling a
// real disk is slow and shared. This shim wraps the default VFS, becomes the
// default while it exists, and makes the chosen operations on files under
// one directory fail the way the real ones would.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TEST_UNIT_CACHE_FAULTVFS_H
#define LINA_TEST_UNIT_CACHE_FAULTVFS_H

#include <sqlite3.h>

#include <string>

namespace lina::cache::test {

/// One at a time. Connections opened while it exists use it; close them
/// before it is destroyed.
class FaultVfs {
public:
  /// Faults apply to files whose path starts with \p directory.
  explicit FaultVfs(std::string directory);
  ~FaultVfs();
  FaultVfs(const FaultVfs &) = delete;
  FaultVfs &operator=(const FaultVfs &) = delete;

  bool registered() const { return ok; }
  /// After \p after more successful writes, every xWrite (database, WAL,
  /// journal) fails with \p code, e.g. SQLITE_FULL or SQLITE_IOERR_WRITE.
  void failWrites(int code, int after = 0);
  /// Database files opened from now on are opened read-only, as SQLite does
  /// by itself when the file's permissions forbid writing.
  void openReadOnly(bool on);
  /// No more faults.
  void clear();
  /// Writes that were failed so far.
  int failedWrites() const;

private:
  bool ok = false;
};

} // namespace lina::cache::test

#endif // LINA_TEST_UNIT_CACHE_FAULTVFS_H
