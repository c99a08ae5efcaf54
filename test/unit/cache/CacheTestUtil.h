//===- CacheTestUtil.h - Shared helpers of the cache tests ------*- C++ -*-===//
//
// Part of lina. Helpers shared by the cache tests: a temporary directory that
// removes itself, file contents, and a raw SQLite connection to tamper with a
// cache behind its back.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TEST_UNIT_CACHE_CACHETESTUTIL_H
#define LINA_TEST_UNIT_CACHE_CACHETESTUTIL_H

#include "lina/Autotune/Cache.h"

#include <sqlite3.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace lina::cache::test {

/// A fresh directory under $TMPDIR (or /tmp), removed with its contents.
class TempDir {
public:
  TempDir() {
    const char *base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base && *base ? base : "/tmp") + "/lina-cache-test-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()))
      dir = buf.data();
  }
  ~TempDir() {
    if (dir.empty())
      return;
    // Tests make directories read-only; give the owner access back so the
    // removal can descend into them.
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(
             dir, std::filesystem::directory_options::skip_permission_denied,
             ec);
         !ec && it != std::filesystem::recursive_directory_iterator();
         it.increment(ec))
      if (it->is_directory(ec))
        ::chmod(it->path().c_str(), 0700);
    ::chmod(dir.c_str(), 0700);
    std::filesystem::remove_all(dir, ec);
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;

  const std::string &path() const { return dir; }
  std::string file(const std::string &name) const { return dir + "/" + name; }

private:
  std::string dir;
};

inline std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline bool fileExists(const std::string &path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

inline std::string randomBytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char &c : s)
    c = static_cast<char>(rng() & 0xff);
  return s;
}

/// Names in \p dir that start with "lina.db.corrupt-" and are not the WAL
/// or journal moved along with one.
inline std::vector<std::string> asideFiles(const std::string &dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto &e : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("lina.db.corrupt-", 0) != 0)
      continue;
    if (name.size() > 4 && (name.compare(name.size() - 4, 4, "-wal") == 0 ||
                            name.find("-journal") != std::string::npos))
      continue;
    out.push_back(e.path().string());
  }
  return out;
}

/// A plain SQLite connection, for tampering with a file behind the cache.
class RawDb {
public:
  explicit RawDb(const std::string &path, bool readOnly = false) {
    int flags = readOnly ? SQLITE_OPEN_READONLY
                         : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    if (sqlite3_open_v2(path.c_str(), &db, flags, nullptr) != SQLITE_OK) {
      sqlite3_close_v2(db);
      db = nullptr;
    }
    if (db)
      sqlite3_busy_timeout(db, 5000);
  }
  ~RawDb() { sqlite3_close_v2(db); }
  RawDb(const RawDb &) = delete;
  RawDb &operator=(const RawDb &) = delete;

  bool ok() const { return db != nullptr; }
  /// Runs \p sql; "" on success, else SQLite's message.
  std::string exec(const std::string &sql) {
    if (!db)
      return "not open";
    char *err = nullptr;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) == SQLITE_OK)
      return "";
    std::string message = err ? err : "error";
    sqlite3_free(err);
    return message;
  }
  /// The first column of the first row as an integer.
  std::optional<int64_t> queryInt(const std::string &sql) {
    sqlite3_stmt *s = nullptr;
    std::optional<int64_t> v;
    if (db &&
        sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
      v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
  }
  sqlite3 *get() { return db; }

private:
  sqlite3 *db = nullptr;
};

/// Options that keep stderr clean; tests read Cache::warnings().
inline CacheOptions quiet() {
  CacheOptions o;
  o.printWarnings = false;
  return o;
}

/// A tuning key as the tuner would build it, varied by \p bucket.
inline TuningKey testKey(const std::string &bucket = "bh=9..16,t=257..1024") {
  TuningKey k;
  k.spec = "decay=scalar update=delta key_dim=128 value_dim=128";
  k.gpuName = "NVIDIA H200";
  k.arch = "sm_90";
  k.smCount = 132;
  k.driverVersion = "12080";
  k.nvrtcVersion = "12.8";
  k.shapeBucket = bucket;
  return k;
}

inline Candidate okCandidate(int64_t chunk, int64_t tileV, int64_t warps,
                             double ms, std::string strategy = "fused") {
  Candidate c;
  c.schedule = {chunk, tileV, warps, std::move(strategy)};
  c.status = CandidateStatus::Ok;
  c.timeMs = ms;
  return c;
}

} // namespace lina::cache::test

#endif // LINA_TEST_UNIT_CACHE_CACHETESTUTIL_H
