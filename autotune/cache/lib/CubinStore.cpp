//===- CubinStore.cpp - Compiled cubins by content key -----------------===//
//
// Part of lina. Each row keeps the SHA-256 of its blob, checked on every read:
// a cubin that was damaged on disk would otherwise be loaded and run.
//
//===----------------------------------------------------------------------===//
#include "CacheImpl.h"
#include "Sqlite.h"

#include "lina/Autotune/Sha256.h"

namespace lina::cache {

namespace {

bool storeCubin(Cache::Impl *impl, const std::string &key,
                std::string_view blob, const CubinInfo &info) {
  std::string checksum = sha256Hex(blob);
  Transaction tx(*impl, "store a cubin");
  if (!tx.ok())
    return false;
  Statement s(impl->db, "INSERT OR REPLACE INTO cubins(key, blob, checksum, "
                        "created, spec_name, arch) VALUES(?1, ?2, ?3, ?4, "
                        "?5, ?6)");
  s.bindText(1, key).bindBlob(2, blob).bindText(3, checksum);
  s.bind(4, unixNow());
  s.bindText(5, info.specName).bindText(6, info.arch);
  int rc = s.run();
  if (rc != SQLITE_DONE)
    return tx.abort(rc);
  return tx.commit();
}

} // namespace

bool Cache::putCubin(const std::string &key, std::string_view blob,
                     const CubinInfo &info) {
  if (!impl)
    return false;
  Impl::Locked locked(*impl);
  // A file that cannot take the write gives way to memory and the cubin is
  // stored there: this process still finds it.
  return impl->retryInMemory(
      [&] { return storeCubin(impl.get(), key, blob, info); });
}

std::optional<std::string> Cache::getCubin(const std::string &key) {
  if (!impl)
    return std::nullopt;
  Impl::Locked locked(*impl);
  std::string blob, checksum;
  {
    Statement s(impl->db, "SELECT blob, checksum FROM cubins WHERE key = ?1");
    s.bindText(1, key);
    int rc = s.step();
    if (rc == SQLITE_DONE)
      return std::nullopt;
    if (rc != SQLITE_ROW) {
      impl->fail(rc, "read a cubin");
      return std::nullopt;
    }
    blob = s.columnBlob(0);
    checksum = s.columnText(1);
  }
  if (sha256Hex(blob) == checksum)
    return blob;

  // Delete the row only while it still holds the damaged bytes: another
  // process may have stored a good copy under the same key meanwhile.
  impl->warn("cubin " + key + " in the cache " + impl->where() +
             " does not match its checksum; deleted it (it will be compiled "
             "again)");
  Transaction tx(*impl, "delete a damaged cubin");
  if (tx.ok()) {
    Statement del(impl->db, "DELETE FROM cubins WHERE key = ?1 AND blob = ?2");
    del.bindText(1, key).bindBlob(2, blob);
    int rc = del.run();
    if (rc != SQLITE_DONE)
      tx.abort(rc);
    else
      tx.commit();
  }
  return std::nullopt;
}

} // namespace lina::cache
