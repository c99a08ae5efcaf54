//===- Inspect.cpp - list, show and clear ------------------------------===//
//
// Part of lina. What `lina cache list|show|clear` print and do.
//
//===----------------------------------------------------------------------===//
#include "CacheImpl.h"
#include "Sqlite.h"

#include "lina/Autotune/Sha256.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace lina::cache {

namespace {

std::string formatMs(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g ms", ms);
  return buf;
}

std::string describeCubin(Statement &s) {
  std::string blob = s.columnBlob(1);
  std::string checksum = s.columnText(2);
  bool intact = sha256Hex(blob) == checksum;
  return "cubin " + s.columnText(0) +
         "\n  size:     " + std::to_string(blob.size()) + " bytes" +
         "\n  checksum: " + checksum +
         (intact ? " (matches)" : " (DOES NOT MATCH: deleted on next read)") +
         "\n  created:  " + formatTime(s.columnInt(3)) + "\n";
}

std::string describeTuning(Cache::Impl &impl, Statement &t) {
  std::string out =
      "tuning " + t.columnText(1) + "\n  spec:    " + t.columnText(2) +
      "\n  gpu:     " + t.columnText(3) + ", " + t.columnText(4) + ", " +
      std::to_string(t.columnInt(5)) + " SMs" +
      "\n  driver:  " + t.columnText(6) + ", nvrtc " + t.columnText(7) +
      ", lina " + t.columnText(8) + "\n  bucket:  " + t.columnText(9) +
      "\n  created: " + formatTime(t.columnInt(10)) + "\n";
  Statement c(impl.db,
              "SELECT chunk_size, tile_v, warps, strategy, status, time_ms, "
              "error FROM candidates WHERE tuning_id = ?1 ORDER BY "
              "status != 'ok', time_ms IS NULL, time_ms, chunk_size, tile_v, "
              "warps, strategy");
  c.bind(1, t.columnInt(0));
  char line[256];
  std::snprintf(line, sizeof line, "  %5s %6s %5s  %-11s  %-13s  %10s  %s\n",
                "chunk", "tile_v", "warps", "strategy", "status", "time",
                "error");
  out += line;
  int rc;
  while ((rc = c.step()) == SQLITE_ROW) {
    std::optional<double> ms = c.columnOptionalDouble(5);
    std::string error = c.columnText(6);
    // The table stays one line per candidate; show the error's first line.
    error = error.substr(0, error.find('\n'));
    std::snprintf(
        line, sizeof line, "  %5lld %6lld %5lld  %-11s  %-13s  %10s  ",
        static_cast<long long>(c.columnInt(0)),
        static_cast<long long>(c.columnInt(1)),
        static_cast<long long>(c.columnInt(2)), c.columnText(3).c_str(),
        c.columnText(4).c_str(), ms ? formatMs(*ms).c_str() : "-");
    out += line + error + "\n";
  }
  if (rc != SQLITE_DONE)
    impl.fail(rc, "read tuning results");
  return out;
}

/// The values a tuning key's rows hold, in bytes: its fields, and per
/// candidate its text and six numbers of eight bytes.
constexpr const char *kTuningBytes =
    "length(CAST(t.key || t.spec || t.gpu || t.arch || t.driver || t.nvrtc "
    "|| t.lina || t.bucket || t.spec_name AS BLOB)) + 16 + coalesce(sum("
    "length(CAST(c.strategy || c.error AS BLOB)) + 48), 0)";

/// Sets each entry's shortKey: sorted, a key shares the most with its
/// neighbours, so one more character than that tells it from every key.
void setShortKeys(std::vector<CacheEntry> &entries) {
  std::vector<const std::string *> keys;
  for (const CacheEntry &e : entries)
    keys.push_back(&e.key);
  std::sort(keys.begin(), keys.end(),
            [](const std::string *a, const std::string *b) { return *a < *b; });
  auto common = [](const std::string &a, const std::string &b) {
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n])
      ++n;
    return n;
  };
  std::map<std::string, size_t> length;
  for (size_t i = 0; i < keys.size(); ++i) {
    size_t shared = 0;
    if (i > 0)
      shared = std::max(shared, common(*keys[i], *keys[i - 1]));
    if (i + 1 < keys.size())
      shared = std::max(shared, common(*keys[i], *keys[i + 1]));
    length[*keys[i]] = std::max(kShortKeyLength, shared + 1);
  }
  for (CacheEntry &e : entries)
    e.shortKey = e.key.substr(0, length[e.key]);
}

} // namespace

std::vector<CacheEntry> readEntries(Cache::Impl &impl) {
  std::vector<CacheEntry> entries;
  int rc;
  {
    Statement s(impl.db, "SELECT key, length(blob), created, spec_name, arch "
                         "FROM cubins ORDER BY created, key");
    while ((rc = s.step()) == SQLITE_ROW) {
      CacheEntry e;
      e.kind = CacheEntry::Kind::Cubin;
      e.key = s.columnText(0);
      e.bytes = s.columnInt(1);
      e.createdAt = e.updatedAt = s.columnInt(2);
      e.specName = s.columnText(3);
      e.arch = s.columnText(4);
      entries.push_back(std::move(e));
    }
    if (rc != SQLITE_DONE) {
      impl.fail(rc, "list cubins");
      setShortKeys(entries);
      return entries;
    }
  }
  std::string sql =
      std::string("SELECT t.key, t.gpu, t.arch, t.bucket, t.created, "
                  "count(c.tuning_id), coalesce(sum(c.status = 'ok'), 0), "
                  "min(CASE WHEN c.status = 'ok' THEN c.time_ms END), "
                  "t.spec_name, t.spec, t.sm_count, max(t.created, "
                  "coalesce(max(c.created), 0)), ") +
      kTuningBytes +
      " FROM tunings t LEFT JOIN candidates c ON c.tuning_id = t.id "
      "GROUP BY t.id ORDER BY t.created, t.key";
  Statement s(impl.db, sql.c_str());
  while ((rc = s.step()) == SQLITE_ROW) {
    CacheEntry e;
    e.kind = CacheEntry::Kind::Tuning;
    e.key = s.columnText(0);
    e.gpuName = s.columnText(1);
    e.arch = s.columnText(2);
    e.bucket = s.columnText(3);
    e.createdAt = s.columnInt(4);
    e.candidates = s.columnInt(5);
    e.okCandidates = s.columnInt(6);
    e.bestMs = s.columnOptionalDouble(7);
    e.specName = s.columnText(8);
    e.spec = s.columnText(9);
    e.smCount = s.columnInt(10);
    e.updatedAt = s.columnInt(11);
    e.bytes = s.columnInt(12);
    entries.push_back(std::move(e));
  }
  if (rc != SQLITE_DONE)
    impl.fail(rc, "list tuning results");
  setShortKeys(entries);
  return entries;
}

std::vector<CacheEntry> Cache::listEntries() {
  if (!impl)
    return {};
  Impl::Locked locked(*impl);
  return readEntries(*impl);
}

std::optional<std::string> Cache::show(const std::string &keyOrPrefix,
                                       std::string *error) {
  auto fail = [&](std::string message) -> std::optional<std::string> {
    if (error)
      *error = std::move(message);
    return std::nullopt;
  };
  if (!impl)
    return fail("no cache");
  if (keyOrPrefix.empty())
    return fail("empty key");
  Impl::Locked locked(*impl);
  // Two rows per table are enough to tell a unique prefix from an
  // ambiguous one.
  Statement cubin(impl->db,
                  "SELECT key, blob, checksum, created FROM cubins WHERE "
                  "substr(key, 1, length(?1)) = ?1 ORDER BY key LIMIT 2");
  Statement tuning(impl->db,
                   "SELECT id, key, spec, gpu, arch, sm_count, driver, nvrtc, "
                   "lina, bucket, created FROM tunings WHERE "
                   "substr(key, 1, length(?1)) = ?1 ORDER BY key LIMIT 2");
  cubin.bindText(1, keyOrPrefix);
  tuning.bindText(1, keyOrPrefix);
  int matches = 0;
  std::string text;
  for (Statement *s : {&cubin, &tuning}) {
    int rc;
    while ((rc = s->step()) == SQLITE_ROW) {
      if (++matches == 1)
        text = s == &cubin ? describeCubin(*s) : describeTuning(*impl, *s);
    }
    if (rc != SQLITE_DONE) {
      impl->fail(rc, "read an entry");
      return fail("cannot read the cache: " + errorMessage(impl->db, rc));
    }
  }
  if (matches == 0)
    return fail("no entry with key " + keyOrPrefix);
  if (matches > 1)
    return fail("key prefix " + keyOrPrefix +
                " matches more than one entry; give more of the key");
  return text;
}

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
  // Give the space back to the file system; failing (e.g. a reader holds the
  // file) only leaves the file larger, so the result is ignored.
  execute(impl->db, "VACUUM");
  return true;
}

} // namespace lina::cache
