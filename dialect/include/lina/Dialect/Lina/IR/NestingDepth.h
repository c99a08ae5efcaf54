//===- NestingDepth.h - Bound an input's nesting before parsing -*- C++ -*-===//
//
// Part of lina. MLIR's parser recurses once per level of `{`, `[`, `(` and
// `<`: input nested a few thousand deep overflows the stack of a command-line
// tool, and a few hundred deep the smaller stack of a thread in a program
// that embeds lina. Every entry point that parses text a user hands it first
// measures the nesting here, without recursion, and refuses what is too deep.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_DIALECT_LINA_IR_NESTINGDEPTH_H
#define LINA_DIALECT_LINA_IR_NESTINGDEPTH_H

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace lina {

/// The deepest nesting lina parses. A spec nests 3 deep and the tile IR that
/// lina-opt reads about 8; 64 levels keep the parser well inside a 256 KiB
/// thread stack.
inline constexpr unsigned kMaxNestingDepth = 64;

/// The deepest nesting of brackets in MLIR text \p text: `{`, `[`, `(` and
/// `<` open, their partners close (`->` and `>=` close nothing); string
/// literals and `//` comments are skipped.
unsigned nestingDepth(llvm::StringRef text);

/// std::nullopt when \p text nests at most kMaxNestingDepth deep, else a
/// one-line error naming \p bufferName, the depth and the limit.
std::optional<std::string> checkNestingDepth(llvm::StringRef text,
                                             llvm::StringRef bufferName);

} // namespace lina

#endif // LINA_DIALECT_LINA_IR_NESTINGDEPTH_H
