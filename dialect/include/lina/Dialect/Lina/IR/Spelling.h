//===- Spelling.h - "Did you mean" for names a user types -------*- C++ -*-===//
//
// Part of lina. One rule for how close a typo must be to be named, shared by
// the spec parser's fields and values and by the preset names of the CLI and
// the C API.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_DIALECT_LINA_IR_SPELLING_H
#define LINA_DIALECT_LINA_IR_SPELLING_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace lina {

/// The candidate nearest to `word` by edit distance (case aside), when it is
/// close enough to be a typo of it: at most one edit in three letters of
/// `word`, so "gdm" finds "gdn" and "bf61" finds "bf16" but "f64" finds
/// nothing. Empty when none is; the first of equally near ones.
llvm::StringRef closestSpelling(llvm::StringRef word,
                                llvm::ArrayRef<llvm::StringRef> candidates);

/// "did you mean 'gdn'?" for the preset name or alias nearest to `name`, or
/// "" when none is close.
std::string suggestPreset(llvm::StringRef name);

/// "a, b, c": `names` for a message that lists the valid ones.
std::string joinSpellings(llvm::ArrayRef<llvm::StringRef> names);

} // namespace lina

#endif // LINA_DIALECT_LINA_IR_SPELLING_H
