//===- CacheImportFuzzer.cpp - Cache import of any file, under libFuzzer -===//
//
// Part of lina. The input is the file given to `lina cache import`; the
// properties are those of CacheImportCheck.h. A violation aborts, so
// libFuzzer keeps the input; copy it into test/fuzz/cache-corpus, where
// cache-tests replays it in every build.
//
//===----------------------------------------------------------------------===//
#include "CacheImportCheck.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace {

std::string scratchDir() {
  const char *base = std::getenv("TMPDIR");
  std::string pattern =
      std::string(base && *base ? base : "/tmp") + "/lina-import-fuzz-XXXXXX";
  if (!mkdtemp(pattern.data()))
    std::abort();
  return pattern;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::string dir = scratchDir();
  std::string file = dir + "/import.db";
  // A journal or WAL left by an earlier input would be read with this one.
  for (const char *suffix : {"", "-journal", "-wal", "-shm"})
    ::unlink((file + suffix).c_str());
  {
    std::ofstream out(file, std::ios::binary);
    out.write(reinterpret_cast<const char *>(data),
              static_cast<std::streamsize>(size));
  }
  std::string broken = lina::cache::fuzz::checkCacheImport(file, dir);
  if (!broken.empty()) {
    std::fprintf(stderr, "cache import: %s\n", broken.c_str());
    std::abort();
  }
  return 0;
}
