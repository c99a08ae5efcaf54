//===- CacheImportCheck.h - What an import must guarantee -------*- C++ -*-===//
//
// Part of lina. The properties of LinaCache's import (`lina cache import
// FILE`) for any file whatsoever, shared by the libFuzzer target and the
// regression test that replays test/fuzz/cache-corpus in every build:
//
//  - a rejected file changes nothing and says why;
//  - an accepted file's cubins are all readable (their checksums held) and
//    their tuning keys findable, without a warning;
//  - what was imported exports and imports again, with the same entries.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TEST_FUZZ_CACHEIMPORTCHECK_H
#define LINA_TEST_FUZZ_CACHEIMPORTCHECK_H

#include "lina/Autotune/Cache.h"

#include <string>
#include <unistd.h>

namespace lina::cache::fuzz {

/// "" when importing \p file into a fresh cache keeps the promises above;
/// otherwise which one broke. \p scratch is a writable directory.
inline std::string checkCacheImport(const std::string &file,
                                    const std::string &scratch) {
  CacheOptions quiet;
  quiet.printWarnings = false;
  Cache cache = Cache::openInMemory(quiet);
  std::string error;
  ImportStats stats;
  if (!cache.importFrom(file, &error, &stats)) {
    if (error.empty())
      return "a rejected import gave no reason";
    if (!cache.listEntries().empty())
      return "a rejected import changed the cache: " + error;
    return "";
  }
  std::vector<CacheEntry> entries = cache.listEntries();
  for (const CacheEntry &e : entries) {
    if (e.kind == CacheEntry::Kind::Cubin && !cache.getCubin(e.key))
      return "imported cubin " + e.key + " cannot be read back";
    // A cubin key may start with a tuning key's digest: show() then asks
    // for more of the key, which is its documented answer, not a failure.
    std::string why;
    if (e.kind == CacheEntry::Kind::Tuning && !cache.show(e.key, &why) &&
        why.find("more than one entry") == std::string::npos)
      return "imported tuning key " + e.key + " cannot be shown: " + why;
  }
  if (!cache.warnings().empty())
    return "reading an accepted import warned: " + cache.warnings().front();
  std::string again = scratch + "/reexport.db";
  ::unlink(again.c_str());
  if (!cache.exportTo(again, &error))
    return "an accepted import does not export: " + error;
  Cache copy = Cache::openInMemory(quiet);
  if (!copy.importFrom(again, &error))
    return "the re-export of an accepted import is rejected: " + error;
  if (copy.listEntries().size() != entries.size())
    return "the re-export lost entries";
  ::unlink(again.c_str());
  return "";
}

} // namespace lina::cache::fuzz

#endif // LINA_TEST_FUZZ_CACHEIMPORTCHECK_H
