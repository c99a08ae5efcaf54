//===- CacheSpecNames.h - A name for a tuning result without one -*- C++ -*-===//
//
// Part of lina. A lina before cache schema 2 stored a tuning result's
// canonical spec text but not the spec's name; `lina cache list` names such
// an entry after the preset whose spec it is, when one is.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TOOLS_CACHESPECNAMES_H
#define LINA_TOOLS_CACHESPECNAMES_H

#include <string>

namespace lina::cli {

/// The name of the preset that, with the dims, heads and dtype that `text`
/// (a tuning key's spec: cache::canonicalSpecText, "decode " before it for
/// a decode tune) gives it, has exactly that text: itself, without its
/// state flags, or as its tuning family (which `lina tune` records its
/// winner under too). "" when there is none.
std::string presetNameForSpecText(const std::string &text);

} // namespace lina::cli

#endif // LINA_TOOLS_CACHESPECNAMES_H
