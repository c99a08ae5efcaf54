//===- FaultVfs.cpp - A SQLite VFS that injects disk faults ------------===//
//
// Part of lina. Every file is the real VFS's file with a small header in
// front; each io method forwards to it, except xWrite when a fault is armed.
//
//===----------------------------------------------------------------------===//
#include "FaultVfs.h"

#include <atomic>
#include <cstring>
#include <mutex>

namespace lina::cache::test {

namespace {

struct State {
  sqlite3_vfs *real = nullptr;
  sqlite3_vfs vfs{};
  sqlite3_io_methods methods{};
  std::string directory;
  std::atomic<int> failCode{0};
  std::atomic<int> writesBeforeFault{0};
  std::atomic<int> failed{0};
  std::atomic<bool> readOnly{false};
};

State &state() {
  static State s;
  return s;
}

struct File {
  sqlite3_file base;
  sqlite3_file *real;
  bool faulty; ///< under the directory the faults apply to
};

sqlite3_file *realOf(sqlite3_file *f) {
  return reinterpret_cast<File *>(f)->real;
}

int xClose(sqlite3_file *f) {
  return realOf(f)->pMethods->xClose(realOf(f));
}
int xRead(sqlite3_file *f, void *p, int n, sqlite3_int64 off) {
  return realOf(f)->pMethods->xRead(realOf(f), p, n, off);
}
int xWrite(sqlite3_file *f, const void *p, int n, sqlite3_int64 off) {
  State &s = state();
  if (reinterpret_cast<File *>(f)->faulty && s.failCode != 0) {
    if (s.writesBeforeFault > 0)
      --s.writesBeforeFault;
    else {
      ++s.failed;
      return s.failCode;
    }
  }
  return realOf(f)->pMethods->xWrite(realOf(f), p, n, off);
}
int xTruncate(sqlite3_file *f, sqlite3_int64 size) {
  return realOf(f)->pMethods->xTruncate(realOf(f), size);
}
int xSync(sqlite3_file *f, int flags) {
  return realOf(f)->pMethods->xSync(realOf(f), flags);
}
int xFileSize(sqlite3_file *f, sqlite3_int64 *size) {
  return realOf(f)->pMethods->xFileSize(realOf(f), size);
}
int xLock(sqlite3_file *f, int l) {
  return realOf(f)->pMethods->xLock(realOf(f), l);
}
int xUnlock(sqlite3_file *f, int l) {
  return realOf(f)->pMethods->xUnlock(realOf(f), l);
}
int xCheckReservedLock(sqlite3_file *f, int *out) {
  return realOf(f)->pMethods->xCheckReservedLock(realOf(f), out);
}
int xFileControl(sqlite3_file *f, int op, void *arg) {
  return realOf(f)->pMethods->xFileControl(realOf(f), op, arg);
}
int xSectorSize(sqlite3_file *f) {
  return realOf(f)->pMethods->xSectorSize(realOf(f));
}
int xDeviceCharacteristics(sqlite3_file *f) {
  return realOf(f)->pMethods->xDeviceCharacteristics(realOf(f));
}
int xShmMap(sqlite3_file *f, int page, int size, int extend,
            void volatile **out) {
  return realOf(f)->pMethods->xShmMap(realOf(f), page, size, extend, out);
}
int xShmLock(sqlite3_file *f, int offset, int n, int flags) {
  return realOf(f)->pMethods->xShmLock(realOf(f), offset, n, flags);
}
void xShmBarrier(sqlite3_file *f) {
  realOf(f)->pMethods->xShmBarrier(realOf(f));
}
int xShmUnmap(sqlite3_file *f, int deleteFlag) {
  return realOf(f)->pMethods->xShmUnmap(realOf(f), deleteFlag);
}
int xFetch(sqlite3_file *f, sqlite3_int64 off, int n, void **out) {
  return realOf(f)->pMethods->xFetch(realOf(f), off, n, out);
}
int xUnfetch(sqlite3_file *f, sqlite3_int64 off, void *p) {
  return realOf(f)->pMethods->xUnfetch(realOf(f), off, p);
}

int xOpen(sqlite3_vfs *, const char *name, sqlite3_file *f, int flags,
          int *outFlags) {
  State &s = state();
  File *file = reinterpret_cast<File *>(f);
  file->real = reinterpret_cast<sqlite3_file *>(file + 1);
  file->faulty =
      name && std::strncmp(name, s.directory.c_str(), s.directory.size()) == 0;
  if (file->faulty && s.readOnly && (flags & SQLITE_OPEN_MAIN_DB))
    flags = (flags & ~(SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)) |
            SQLITE_OPEN_READONLY;
  int rc = s.real->xOpen(s.real, name, file->real, flags, outFlags);
  // SQLite calls xClose only when pMethods is set; mirror the real file.
  file->base.pMethods = file->real->pMethods ? &s.methods : nullptr;
  return rc;
}

// The rest of the VFS is the real one's.
int xDelete(sqlite3_vfs *, const char *name, int syncDir) {
  return state().real->xDelete(state().real, name, syncDir);
}
int xAccess(sqlite3_vfs *, const char *name, int flags, int *out) {
  return state().real->xAccess(state().real, name, flags, out);
}
int xFullPathname(sqlite3_vfs *, const char *name, int n, char *out) {
  return state().real->xFullPathname(state().real, name, n, out);
}

} // namespace

FaultVfs::FaultVfs(std::string directory) {
  State &s = state();
  s.real = sqlite3_vfs_find(nullptr);
  if (!s.real)
    return;
  s.directory = std::move(directory);
  clear();
  s.vfs = *s.real; // dlopen, randomness, sleep, time: the real ones
  s.vfs.zName = "lina-fault";
  s.vfs.szOsFile = static_cast<int>(sizeof(File)) + s.real->szOsFile;
  s.vfs.pNext = nullptr;
  s.vfs.xOpen = xOpen;
  s.vfs.xDelete = xDelete;
  s.vfs.xAccess = xAccess;
  s.vfs.xFullPathname = xFullPathname;
  s.methods = sqlite3_io_methods{3,
                                 xClose,
                                 xRead,
                                 xWrite,
                                 xTruncate,
                                 xSync,
                                 xFileSize,
                                 xLock,
                                 xUnlock,
                                 xCheckReservedLock,
                                 xFileControl,
                                 xSectorSize,
                                 xDeviceCharacteristics,
                                 xShmMap,
                                 xShmLock,
                                 xShmBarrier,
                                 xShmUnmap,
                                 xFetch,
                                 xUnfetch};
  ok = sqlite3_vfs_register(&s.vfs, /*makeDflt=*/1) == SQLITE_OK;
}

FaultVfs::~FaultVfs() {
  if (ok)
    sqlite3_vfs_unregister(&state().vfs);
}

void FaultVfs::failWrites(int code, int after) {
  state().writesBeforeFault = after;
  state().failCode = code;
}

void FaultVfs::openReadOnly(bool on) { state().readOnly = on; }

void FaultVfs::clear() {
  State &s = state();
  s.failCode = 0;
  s.writesBeforeFault = 0;
  s.failed = 0;
  s.readOnly = false;
}

int FaultVfs::failedWrites() const { return state().failed; }

} // namespace lina::cache::test
