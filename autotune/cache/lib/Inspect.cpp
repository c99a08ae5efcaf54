//===- Inspect.cpp - list and show -------------------------------------===//
//
// Part of lina. What `lina cache list|show` print.
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

std::string describeCubin(const CacheEntryDetail &d) {
  const CacheEntry &e = d.entry;
  return "cubin " + e.key + "\n  spec:     " +
         (e.specName.empty() ? "(not recorded)" : e.specName) +
         "\n  arch:     " + (e.arch.empty() ? "(not recorded)" : e.arch) +
         "\n  size:     " + std::to_string(e.bytes) + " bytes" +
         "\n  checksum: " + d.checksum +
         (d.checksumMatches ? " (matches)"
                            : " (DOES NOT MATCH: deleted on next read)") +
         "\n  created:  " + formatTime(e.createdAt) + "\n";
}

std::string describeTuning(const CacheEntryDetail &d) {
  const CacheEntry &e = d.entry;
  std::string out =
      "tuning " + e.key + "\n  name:    " +
      (e.specName.empty() ? "(not recorded)" : e.specName) +
      "\n  spec:    " + e.spec + "\n  gpu:     " + e.gpuName + ", " + e.arch +
      ", " + std::to_string(e.smCount) + " SMs" + "\n  driver:  " +
      d.driverVersion + ", nvrtc " + d.nvrtcVersion + ", lina " +
      d.linaVersion + "\n  bucket:  " + e.bucket +
      "\n  created: " + formatTime(e.createdAt) +
      "\n  updated: " + formatTime(e.updatedAt) + "\n";
  char line[256];
  std::snprintf(line, sizeof line, "  %5s %6s %5s  %-11s  %-13s  %10s  %s\n",
                "chunk", "tile_v", "warps", "strategy", "status", "time",
                "error");
  out += line;
  for (const Candidate &c : d.results) {
    // The table stays one line per candidate; show the error's first line.
    std::string error = c.error.substr(0, c.error.find('\n'));
    std::snprintf(line, sizeof line,
                  "  %5lld %6lld %5lld  %-11s  %-13s  %10s  ",
                  static_cast<long long>(c.schedule.chunkSize),
                  static_cast<long long>(c.schedule.tileV),
                  static_cast<long long>(c.schedule.warps),
                  c.schedule.strategy.c_str(), toString(c.status),
                  c.timeMs ? formatMs(*c.timeMs).c_str() : "-");
    out += line + error + "\n";
  }
  return out;
}

/// One line per entry for the message that a prefix is ambiguous.
std::string describeMatches(const std::vector<CacheEntry> &matches) {
  std::string out;
  for (const CacheEntry &e : matches) {
    std::string what = e.kind == CacheEntry::Kind::Cubin
                           ? "cubin   " + e.arch
                           : "tuning  " + e.gpuName + " " + e.arch + " " +
                                 e.bucket;
    out += "\n  " + e.shortKey + "  " + what +
           (e.specName.empty() ? "" : " (" + e.specName + ")");
  }
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

/// The entry whose key is \p keyOrPrefix, else those whose key starts
/// with it: a whole key is never ambiguous, even where it begins another.
std::vector<CacheEntry> matchEntries(std::vector<CacheEntry> entries,
                                     const std::string &keyOrPrefix) {
  std::vector<CacheEntry> prefixed;
  for (CacheEntry &e : entries) {
    if (e.key == keyOrPrefix)
      return {std::move(e)};
    if (e.key.compare(0, keyOrPrefix.size(), keyOrPrefix) == 0)
      prefixed.push_back(std::move(e));
  }
  return prefixed;
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

std::vector<CacheEntry> Cache::findEntries(const std::string &keyOrPrefix) {
  if (!impl || keyOrPrefix.empty())
    return {};
  Impl::Locked locked(*impl);
  return matchEntries(readEntries(*impl), keyOrPrefix);
}

std::optional<CacheEntryDetail>
Cache::entryDetail(const std::string &keyOrPrefix, std::string *error) {
  auto fail = [&](std::string message) -> std::optional<CacheEntryDetail> {
    if (error)
      *error = std::move(message);
    return std::nullopt;
  };
  if (!impl)
    return fail("no cache");
  if (keyOrPrefix.empty())
    return fail("empty key");
  Impl::Locked locked(*impl);
  std::vector<CacheEntry> matches =
      matchEntries(readEntries(*impl), keyOrPrefix);
  if (matches.empty())
    return fail("no entry with key " + keyOrPrefix);
  if (matches.size() > 1)
    return fail("key prefix " + keyOrPrefix + " matches more than one entry (" +
                std::to_string(matches.size()) +
                "); give more of the key:" + describeMatches(matches));
  CacheEntryDetail d;
  d.entry = std::move(matches.front());
  int rc;
  if (d.entry.kind == CacheEntry::Kind::Cubin) {
    Statement s(impl->db, "SELECT blob, checksum FROM cubins WHERE key = ?1");
    s.bindText(1, d.entry.key);
    rc = s.step();
    if (rc == SQLITE_ROW) {
      d.checksum = s.columnText(1);
      d.checksumMatches = sha256Hex(s.columnBlob(0)) == d.checksum;
      return d;
    }
  } else {
    Statement t(impl->db, "SELECT driver, nvrtc, lina FROM tunings WHERE "
                          "key = ?1");
    t.bindText(1, d.entry.key);
    rc = t.step();
    if (rc == SQLITE_ROW) {
      d.driverVersion = t.columnText(0);
      d.nvrtcVersion = t.columnText(1);
      d.linaVersion = t.columnText(2);
      d.results = readCandidates(*impl, d.entry.key);
      return d;
    }
  }
  // Gone since it was listed (another process removed it), or unreadable.
  if (rc == SQLITE_DONE)
    return fail("no entry with key " + keyOrPrefix);
  impl->fail(rc, "read an entry");
  return fail("cannot read the cache: " + errorMessage(impl->db, rc));
}

std::optional<std::string> Cache::show(const std::string &keyOrPrefix,
                                       std::string *error) {
  std::optional<CacheEntryDetail> d = entryDetail(keyOrPrefix, error);
  if (!d)
    return std::nullopt;
  return d->entry.kind == CacheEntry::Kind::Cubin ? describeCubin(*d)
                                                  : describeTuning(*d);
}

} // namespace lina::cache
