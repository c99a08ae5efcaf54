//===- CacheCommand.cpp - `lina cache` ---------------------------------===//
//
// Part of lina. Looks into and manages the SQLite cache of cubins and tuning
// results: list, show KEY, clear, export FILE, import FILE, path.
//
//===----------------------------------------------------------------------===//
#include "CacheListing.h"
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

} // namespace

int cacheCommand(const std::vector<std::string> &args) {
  ArgParser p("cache",
              "list | show KEY | clear | export FILE | import FILE | "
              "path",
              "Manage lina's cache ($LINA_CACHE_DIR/lina.db, else "
              "~/.cache/lina/lina.db): compiled cubins\nand every tuning "
              "result. A damaged file is moved aside and rebuilt.");
  p.flag("json", "list: the entries as a JSON array of objects; show: the "
                 "entry as one JSON object");
  if (!p.parse(args))
    return 0;
  const std::vector<std::string> &words = p.positional();
  if (words.empty())
    throw UsageError("expected a subcommand: list, show KEY, clear, export "
                     "FILE, import FILE or path");
  const std::string &verb = words.front();
  auto wantArgs = [&](size_t n, const char *what) {
    if (words.size() != n + 1)
      throw UsageError("'lina cache " + verb + "' takes " + what);
  };
  bool json = p.has("json");
  if (json && verb != "list" && verb != "show")
    throw UsageError("--json is for 'lina cache list' and 'show', not '" +
                     verb + "'");
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
  // Quiet, and its warnings printed here: a command that cannot do its
  // work says why in one error line rather than a warning and an error.
  cache::CacheOptions options;
  options.printWarnings = false;
  cache::Cache db = cache::Cache::openDefault(options);
  size_t shown = 0;
  auto printWarnings = [&] {
    std::vector<std::string> warnings = db.warnings();
    for (; shown < warnings.size(); ++shown)
      std::fprintf(stderr, "%s\n", warnings[shown].c_str());
  };
  // What the cache holds must be the file's: an empty stand-in for a file
  // that could not be read (a newer lina's, an unusable location) would be
  // listed or exported as if it were the cache.
  auto needEntries = [&](const std::string &what) {
    if (!db.holdsFileEntries())
      throw std::runtime_error("cannot " + what + ": " + db.notSavedReason());
    printWarnings();
  };
  // A command that writes fails unless the file took the write; the cache
  // itself would carry on in memory, and the user would be told of a
  // success that is gone when the command exits.
  auto needWrites = [&](const std::string &failure) {
    if (!db.notSavedReason().empty())
      throw std::runtime_error(failure + ": " + db.notSavedReason());
    printWarnings();
  };
  if (verb == "list") {
    wantArgs(0, "no arguments");
    needEntries("list the cache");
    std::vector<cache::CacheEntry> entries = db.listEntries();
    printWarnings();
    int64_t now = unixNow();
    if (json) {
      llvm::json::Array array;
      for (const cache::CacheEntry &e : entries)
        array.push_back(entryToJson(e, now));
      llvm::outs() << llvm::formatv("{0:2}", llvm::json::Value(std::move(array)))
                   << "\n";
      return 0;
    }
    printEntryTable(entries, now);
    std::printf("%zu entries in %s\n", entries.size(),
                db.isInMemory() ? "an in-memory copy of the cache"
                                : db.path().c_str());
    return 0;
  }
  if (verb == "show") {
    wantArgs(1, "one KEY (or a unique prefix of one, from 'lina cache list')");
    needEntries("read the cache");
    std::string error;
    if (json) {
      std::optional<cache::CacheEntryDetail> detail =
          db.entryDetail(words[1], &error);
      printWarnings();
      if (!detail)
        throw UsageError(error);
      llvm::outs() << llvm::formatv(
                          "{0:2}",
                          llvm::json::Value(detailToJson(*detail, unixNow())))
                   << "\n";
      return 0;
    }
    std::optional<std::string> text = db.show(words[1], &error);
    printWarnings();
    if (!text)
      throw UsageError(error);
    std::fputs(text->c_str(), stdout);
    return 0;
  }
  if (verb == "clear") {
    wantArgs(0, "no arguments");
    needWrites("cannot clear the cache");
    std::string path = db.path();
    if (!db.clear() || !db.notSavedReason().empty())
      throw std::runtime_error(
          "cannot clear the cache: " +
          (db.notSavedReason().empty() ? "could not write " + path
                                       : db.notSavedReason()));
    printWarnings();
    std::printf("cleared %s\n", path.c_str());
    return 0;
  }
  if (verb == "export") {
    wantArgs(1, "one FILE");
    needEntries("export the cache");
    std::string error;
    if (!db.exportTo(words[1], &error))
      throw std::runtime_error("export failed: " + error);
    printWarnings();
    std::printf("exported to %s\n", words[1].c_str());
    return 0;
  }
  if (verb == "import") {
    wantArgs(1, "one FILE");
    needWrites("import failed, nothing changed");
    std::string error;
    cache::ImportStats stats;
    // Rows no tune records are refused here, not found later by a kernel.
    if (!db.importFrom(words[1], &error, &stats, storedScheduleProblem))
      throw std::runtime_error("import failed, nothing changed: " + error);
    if (!db.notSavedReason().empty())
      throw std::runtime_error("import failed, nothing changed: " +
                               db.notSavedReason());
    printWarnings();
    std::printf("imported %lld cubins, %lld tuning keys, %lld candidates\n",
                (long long)stats.cubins, (long long)stats.tunings,
                (long long)stats.candidates);
    return 0;
  }
  throw UsageError("unknown subcommand '" + verb +
                   "': expected list, show, clear, export, import or path");
}

} // namespace lina::cli
