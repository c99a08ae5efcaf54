//===- CacheCommand.cpp - `lina cache` ---------------------------------===//
//
// Part of lina. Looks into and manages the SQLite cache of cubins and tuning
// results: list, show KEY, rm KEY..., prune --older-than D, clear, export
// FILE, import FILE, path.
//
//===----------------------------------------------------------------------===//
#include "CacheListing.h"
#include "CacheRemove.h"
#include "CacheSession.h"
#include "CommandLine.h"
#include "Commands.h"

#include "lina/Autotune/Cache.h"
#include "lina/Autotune/CacheLocation.h"
#include "lina/Autotune/TunedLookup.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <ctime>
#include <stdexcept>

namespace lina::cli {

namespace {

int64_t unixNow() { return static_cast<int64_t>(std::time(nullptr)); }

void printJson(llvm::json::Value value) {
  llvm::outs() << llvm::formatv("{0:2}", value) << "\n";
}

int list(CacheSession &s, bool json) {
  s.needEntries("list the cache");
  std::vector<cache::CacheEntry> entries = s.db.listEntries();
  s.printWarnings();
  int64_t now = unixNow();
  if (json) {
    llvm::json::Array array;
    for (const cache::CacheEntry &e : entries)
      array.push_back(entryToJson(e, now));
    printJson(std::move(array));
    return 0;
  }
  printEntryTable(entries, now);
  std::printf("%zu entries in %s\n", entries.size(),
              s.db.isInMemory() ? "an in-memory copy of the cache"
                                : s.db.path().c_str());
  return 0;
}

int show(CacheSession &s, const std::string &key, bool json) {
  s.needEntries("read the cache");
  std::string error;
  if (json) {
    std::optional<cache::CacheEntryDetail> detail =
        s.db.entryDetail(key, &error);
    s.printWarnings();
    if (!detail)
      throw UsageError(error);
    printJson(detailToJson(*detail, unixNow()));
    return 0;
  }
  std::optional<std::string> text = s.db.show(key, &error);
  s.printWarnings();
  if (!text)
    throw UsageError(error);
  std::fputs(text->c_str(), stdout);
  return 0;
}

} // namespace

int cacheCommand(const std::vector<std::string> &args) {
  ArgParser p("cache",
              "list | show KEY | rm KEY... | prune --older-than DURATION | "
              "clear | export FILE | import FILE | path",
              "Manage lina's cache ($LINA_CACHE_DIR/lina.db, else "
              "~/.cache/lina/lina.db): compiled cubins\nand every tuning "
              "result. A damaged file is moved aside and rebuilt. KEY is an "
              "entry's key\nor a unique prefix of one, as 'lina cache list' "
              "shows them.");
  p.flag("json", "list: the entries as a JSON array of objects; show: the "
                 "entry as one JSON object");
  p.option("older-than", "DURATION",
           "prune: remove the entries last written longer ago than this: "
           "30d, 12h, 90m, 45s or 2w");
  p.flag("dry-run", "prune: list what would be removed, remove nothing");
  if (!p.parse(args))
    return 0;
  const std::vector<std::string> &words = p.positional();
  if (words.empty())
    throw UsageError("expected a subcommand: list, show KEY, rm KEY..., "
                     "prune --older-than DURATION, clear, export FILE, "
                     "import FILE or path");
  const std::string &verb = words.front();
  auto wantArgs = [&](size_t n, const char *what) {
    if (words.size() != n + 1)
      throw UsageError("'lina cache " + verb + "' takes " + what);
  };
  bool json = p.has("json");
  if (json && verb != "list" && verb != "show")
    throw UsageError("--json is for 'lina cache list' and 'show', not '" +
                     verb + "'");
  for (const char *option : {"older-than", "dry-run"})
    if (p.has(option) && verb != "prune")
      throw UsageError(std::string("--") + option +
                       " is for 'lina cache prune', not '" + verb + "'");
  if (verb == "path") {
    wantArgs(0, "no arguments");
    cache::CacheLocation where = cache::findCacheLocation();
    std::printf("%s\n", where.path.c_str());
    if (!where.ok())
      std::fprintf(stderr,
                   "lina: warning: %s (the cache will be kept in "
                   "memory)\n",
                   where.error.c_str());
    return 0;
  }
  // Checked before the cache is opened: a usage error changes nothing.
  if (verb == "list" || verb == "clear")
    wantArgs(0, "no arguments");
  else if (verb == "show")
    wantArgs(1, "one KEY (or a unique prefix of one, from 'lina cache list')");
  else if (verb == "export" || verb == "import")
    wantArgs(1, "one FILE");
  else if (verb == "prune") {
    wantArgs(0, "no arguments, but --older-than DURATION");
    if (!p.has("older-than"))
      throw UsageError("'lina cache prune' needs --older-than DURATION (e.g. "
                       "30d, 12h or 90m)");
  } else if (verb != "rm")
    throw UsageError("unknown subcommand '" + verb +
                     "': expected list, show, rm, prune, clear, export, "
                     "import or path");

  CacheSession s;
  if (verb == "list")
    return list(s, json);
  if (verb == "show")
    return show(s, words[1], json);
  if (verb == "rm")
    return cacheRemove(s, {words.begin() + 1, words.end()});
  if (verb == "prune")
    return cachePrune(s, p.get("older-than"), p.has("dry-run"));
  if (verb == "clear") {
    s.needWrites("cannot clear the cache");
    std::string path = s.db.path();
    s.needWritten(s.db.clear(), "cannot clear the cache");
    std::printf("cleared %s\n", path.c_str());
    return 0;
  }
  if (verb == "export") {
    s.needEntries("export the cache");
    std::string error;
    if (!s.db.exportTo(words[1], &error))
      throw std::runtime_error("export failed: " + error);
    s.printWarnings();
    std::printf("exported to %s\n", words[1].c_str());
    return 0;
  }
  // import
  s.needWrites("import failed, nothing changed");
  std::string error;
  cache::ImportStats stats;
  // Rows no tune records are refused here, not found later by a kernel.
  if (!s.db.importFrom(words[1], &error, &stats, storedScheduleProblem))
    throw std::runtime_error("import failed, nothing changed: " + error);
  s.needWritten(true, "import failed, nothing changed");
  std::printf("imported %lld cubins, %lld tuning keys, %lld candidates\n",
              (long long)stats.cubins, (long long)stats.tunings,
              (long long)stats.candidates);
  return 0;
}

} // namespace lina::cli
