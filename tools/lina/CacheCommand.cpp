//===- CacheCommand.cpp - `lina cache` ---------------------------------===//
//
// Part of lina. Looks into and manages the SQLite cache of cubins and tuning
// results: list, show KEY, clear, export FILE, import FILE, path.
//
//===----------------------------------------------------------------------===//
#include "CommandLine.h"
#include "Commands.h"

#include "lina/Autotune/Cache.h"
#include "lina/Autotune/CacheLocation.h"

#include <cstdio>
#include <stdexcept>

namespace lina::cli {

int cacheCommand(const std::vector<std::string> &args) {
  ArgParser p("cache",
              "list | show KEY | clear | export FILE | import FILE | "
              "path",
              "Manage lina's cache ($LINA_CACHE_DIR/lina.db, else "
              "~/.cache/lina/lina.db): compiled cubins\nand every tuning "
              "result. A damaged file is moved aside and rebuilt.");
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
  cache::Cache db = cache::Cache::openDefault();
  if (verb == "list") {
    wantArgs(0, "no arguments");
    std::vector<cache::CacheEntry> entries = db.listEntries();
    for (const cache::CacheEntry &e : entries)
      std::printf("%-6s %.16s  %s\n",
                  e.kind == cache::CacheEntry::Kind::Cubin ? "cubin" : "tune",
                  e.key.c_str(), e.summary.c_str());
    std::printf("%zu entries in %s\n", entries.size(),
                db.isInMemory() ? "an in-memory cache" : db.path().c_str());
    return 0;
  }
  if (verb == "show") {
    wantArgs(1, "one KEY (or a unique prefix of one, from 'lina cache list')");
    std::string error;
    std::optional<std::string> text = db.show(words[1], &error);
    if (!text)
      throw UsageError(error);
    std::fputs(text->c_str(), stdout);
    return 0;
  }
  if (verb == "clear") {
    wantArgs(0, "no arguments");
    if (!db.clear())
      throw std::runtime_error("could not clear " + db.path());
    std::printf("cleared %s\n", db.path().c_str());
    return 0;
  }
  if (verb == "export") {
    wantArgs(1, "one FILE");
    std::string error;
    if (!db.exportTo(words[1], &error))
      throw std::runtime_error("export failed: " + error);
    std::printf("exported to %s\n", words[1].c_str());
    return 0;
  }
  if (verb == "import") {
    wantArgs(1, "one FILE");
    std::string error;
    cache::ImportStats stats;
    if (!db.importFrom(words[1], &error, &stats))
      throw std::runtime_error("import failed, nothing changed: " + error);
    std::printf("imported %lld cubins, %lld tuning keys, %lld candidates\n",
                (long long)stats.cubins, (long long)stats.tunings,
                (long long)stats.candidates);
    return 0;
  }
  throw UsageError("unknown subcommand '" + verb +
                   "': expected list, show, clear, export, import or path");
}

} // namespace lina::cli
