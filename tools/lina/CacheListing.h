//===- CacheListing.h - Cache entries as a table or as JSON -----*- C++ -*-===//
//
// Part of lina. What `lina cache list` prints for each entry (kind, spec,
// bucket, GPU, age, size and a short key), as aligned columns or (--json)
// as objects with the same facts, and `lina cache show KEY --json`.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TOOLS_CACHELISTING_H
#define LINA_TOOLS_CACHELISTING_H

#include "lina/Autotune/Cache.h"

#include "llvm/Support/JSON.h"

#include <cstdint>
#include <string>
#include <vector>

namespace lina::cli {

/// The spec's name for `e`: the stored one, else for a tuning result the
/// preset whose spec it is (presetNameForSpecText), else "". `recorded`
/// says which.
struct EntryName {
  std::string name;
  bool recorded = false;
};
EntryName entryName(const cache::CacheEntry &e);

/// "cubin" or "tuning".
const char *kindName(const cache::CacheEntry &e);

/// The entry's facts; ages are from `now` (Unix seconds). Every object has
/// every field; a field that does not apply to the kind is null.
llvm::json::Object entryToJson(const cache::CacheEntry &e, int64_t now);

/// entryToJson() of the entry, and what `lina cache show` adds: a cubin's
/// "checksum" and "checksum_matches"; a tuning result's "driver", "nvrtc",
/// "lina_version" and "results", every candidate as {"schedule" (as `lina
/// tune` names it), "chunk_size", "tile_v", "warps", "strategy", "status",
/// "time_ms", "error", "created"}, the Ok ones fastest first.
llvm::json::Object detailToJson(const cache::CacheEntryDetail &d,
                                int64_t now);

/// The entries as a table with a header, one line each; nothing when there
/// are none. A name that was not recorded but derived is marked with "*",
/// and a line under the table says so.
void printEntryTable(const std::vector<cache::CacheEntry> &entries,
                     int64_t now);

} // namespace lina::cli

#endif // LINA_TOOLS_CACHELISTING_H
