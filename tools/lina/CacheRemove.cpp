//===- CacheRemove.cpp - `lina cache rm` and `prune` -------------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "CacheRemove.h"

#include "CacheListing.h"
#include "CommandLine.h"
#include "HumanUnits.h"

#include <cstdio>
#include <ctime>
#include <set>

namespace lina::cli {

namespace {

std::string entries(size_t n) {
  return std::to_string(n) + (n == 1 ? " entry" : " entries");
}

} // namespace

int cacheRemove(CacheSession &session, const std::vector<std::string> &keys) {
  if (keys.empty())
    throw UsageError("'lina cache rm' takes one KEY or more (or unique "
                     "prefixes, from 'lina cache list')");
  session.needWrites("cannot remove entries");
  std::vector<cache::CacheEntry> found;
  std::set<std::string> seen;
  for (const std::string &key : keys) {
    std::string error;
    std::optional<cache::CacheEntryDetail> d =
        session.db.entryDetail(key, &error);
    if (!d)
      throw UsageError("nothing was removed: " + error);
    // Two prefixes of one entry remove it once.
    if (seen.insert(d->entry.key).second)
      found.push_back(d->entry);
  }
  std::vector<std::string> whole;
  for (const cache::CacheEntry &e : found)
    whole.push_back(e.key);
  int64_t removed = 0;
  bool ok = session.db.removeEntries(whole, &removed);
  session.needWritten(ok, "cannot remove entries");
  for (const cache::CacheEntry &e : found) {
    EntryName name = entryName(e);
    std::printf("removed %s %s%s\n", kindName(e), e.shortKey.c_str(),
                name.name.empty() ? "" : (" (" + name.name + ")").c_str());
  }
  // Another process may have removed one between the lookup and now.
  if (size_t(removed) != found.size())
    std::printf("%s had gone already\n",
                entries(found.size() - size_t(removed)).c_str());
  return 0;
}

int cachePrune(CacheSession &session, const std::string &olderThan,
               bool dryRun) {
  std::optional<int64_t> age = parseDuration(olderThan);
  if (!age)
    throw UsageError("--older-than expects a count and a unit (s, m, h, d "
                     "or w), e.g. 30d, 12h or 90m; got '" +
                     olderThan + "'");
  int64_t now = static_cast<int64_t>(std::time(nullptr));
  int64_t cutoff = now - *age;
  if (dryRun) {
    session.needEntries("read the cache");
    std::vector<cache::CacheEntry> old;
    for (cache::CacheEntry &e : session.db.listEntries())
      if (e.updatedAt < cutoff)
        old.push_back(std::move(e));
    session.printWarnings();
    printEntryTable(old, now);
    std::printf("would remove %s last written more than %s ago\n",
                entries(old.size()).c_str(), olderThan.c_str());
    return 0;
  }
  session.needWrites("cannot prune the cache");
  std::vector<cache::CacheEntry> removed;
  bool ok = session.db.removeOlderThan(cutoff, &removed);
  session.needWritten(ok, "cannot prune the cache");
  std::printf("removed %s last written more than %s ago\n",
              entries(removed.size()).c_str(), olderThan.c_str());
  return 0;
}

} // namespace lina::cli
