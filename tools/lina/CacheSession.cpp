//===- CacheSession.cpp - The cache as `lina cache` uses it ------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "CacheSession.h"

#include <cstdio>
#include <stdexcept>

namespace lina::cli {

namespace {

cache::CacheOptions quiet() {
  cache::CacheOptions options;
  options.printWarnings = false;
  return options;
}

} // namespace

CacheSession::CacheSession() : db(cache::Cache::openDefault(quiet())) {}

void CacheSession::printWarnings() {
  std::vector<std::string> warnings = db.warnings();
  for (; shown < warnings.size(); ++shown)
    std::fprintf(stderr, "%s\n", warnings[shown].c_str());
}

void CacheSession::needEntries(const std::string &what) {
  if (!db.holdsFileEntries())
    throw std::runtime_error("cannot " + what + ": " + db.notSavedReason());
  printWarnings();
}

void CacheSession::needWrites(const std::string &failure) {
  if (!db.notSavedReason().empty())
    throw std::runtime_error(failure + ": " + db.notSavedReason());
  printWarnings();
}

void CacheSession::needWritten(bool ok, const std::string &failure) {
  if (!db.notSavedReason().empty())
    throw std::runtime_error(failure + ": " + db.notSavedReason());
  if (!ok)
    throw std::runtime_error(failure + ": could not write " + db.path());
  printWarnings();
}

} // namespace lina::cli
