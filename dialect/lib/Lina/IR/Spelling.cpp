//===- Spelling.cpp - "Did you mean" for names a user types ------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Dialect/Lina/IR/Spelling.h"

#include "lina/Spec/Presets.h"

#include "llvm/ADT/SmallVector.h"

namespace lina {

llvm::StringRef closestSpelling(llvm::StringRef word,
                                llvm::ArrayRef<llvm::StringRef> candidates) {
  // A third of the letters: one slip in a short name, two in "bf61", while
  // a different short word ("f64" against "f16") is not taken for a typo.
  unsigned limit = (word.size() + 2) / 3;
  llvm::StringRef best;
  unsigned bestDistance = limit + 1;
  for (llvm::StringRef candidate : candidates) {
    unsigned distance = word.edit_distance_insensitive(
        candidate, /*AllowReplacements=*/true, /*MaxEditDistance=*/limit);
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

std::string suggestPreset(llvm::StringRef name) {
  llvm::SmallVector<llvm::StringRef> names;
  for (const Preset &preset : presets()) {
    names.push_back(preset.name);
    for (const char *alias : preset.aliases)
      names.push_back(alias);
  }
  llvm::StringRef closest = closestSpelling(name, names);
  return closest.empty() ? "" : "did you mean '" + closest.str() + "'?";
}

std::string joinSpellings(llvm::ArrayRef<llvm::StringRef> names) {
  std::string text;
  for (llvm::StringRef name : names)
    text += (text.empty() ? "" : ", ") + name.str();
  return text;
}

} // namespace lina
