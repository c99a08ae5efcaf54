//===- NestingDepth.cpp - Bound an input's nesting before parsing -------===//
//
// Part of lina. A single forward scan: no recursion, so the check itself
// cannot overflow the stack it protects. It over-counts rather than
// under-counts where MLIR's own lexing is subtler (a `<` inside an affine
// expression, say), which only matters for input near the limit.
//
//===----------------------------------------------------------------------===//
#include "lina/Dialect/Lina/IR/NestingDepth.h"

#include <algorithm>

namespace lina {

unsigned nestingDepth(llvm::StringRef text) {
  unsigned depth = 0, deepest = 0;
  for (size_t i = 0, n = text.size(); i < n; ++i) {
    char c = text[i];
    char next = i + 1 < n ? text[i + 1] : '\0';
    switch (c) {
    case '"':
      // A string literal: brackets inside it are text. A backslash escapes
      // the next character.
      for (++i; i < n && text[i] != '"'; ++i)
        if (text[i] == '\\')
          ++i;
      break;
    case '/':
      if (next == '/')
        while (i < n && text[i] != '\n')
          ++i;
      break;
    case '{':
    case '[':
    case '(':
    case '<':
      deepest = std::max(deepest, ++depth);
      break;
    case '}':
    case ']':
    case ')':
      depth -= depth > 0;
      break;
    case '>':
      if (next != '=')
        depth -= depth > 0;
      break;
    case '-':
      if (next == '>')
        ++i; // an arrow, not a closing '>'
      break;
    default:
      break;
    }
  }
  return deepest;
}

std::optional<std::string> checkNestingDepth(llvm::StringRef text,
                                             llvm::StringRef bufferName) {
  unsigned depth = nestingDepth(text);
  if (depth <= kMaxNestingDepth)
    return std::nullopt;
  return "'" + bufferName.str() + "' nests " + std::to_string(depth) +
         " levels of brackets deep; lina parses at most " +
         std::to_string(kMaxNestingDepth) +
         " (a spec needs 3): flatten the input";
}

} // namespace lina
