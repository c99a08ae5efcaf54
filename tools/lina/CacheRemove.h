//===- CacheRemove.h - `lina cache rm` and `prune` --------------*- C++ -*-===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TOOLS_CACHEREMOVE_H
#define LINA_TOOLS_CACHEREMOVE_H

#include "CacheSession.h"

#include <string>
#include <vector>

namespace lina::cli {

/// `lina cache rm KEY...`: each KEY a whole key or a unique prefix of one.
/// Every KEY is looked up first: one that matches nothing or more than one
/// entry is a usage error, and then nothing is removed.
int cacheRemove(CacheSession &session, const std::vector<std::string> &keys);

/// `lina cache prune --older-than DURATION [--dry-run]`: removes every
/// entry last written longer ago than DURATION ("30d", "12h", "90m") and
/// says how many; --dry-run lists them instead. A malformed DURATION is a
/// usage error.
int cachePrune(CacheSession &session, const std::string &olderThan,
               bool dryRun);

} // namespace lina::cli

#endif // LINA_TOOLS_CACHEREMOVE_H
