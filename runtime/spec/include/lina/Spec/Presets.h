//===- Presets.h - The named recurrences users train and serve --*- C++ -*-===//
//
// Part of lina. Each preset is a Spec with fla-compatible defaults; the same
// specs live as examples/<name>.mlir (a test keeps the two in step).
//
//===----------------------------------------------------------------------===//
#ifndef LINA_SPEC_PRESETS_H
#define LINA_SPEC_PRESETS_H

#include "lina/Spec/Spec.h"

#include <optional>
#include <string>
#include <vector>

namespace lina {

struct Preset {
  const char *name;
  const char *summary;  ///< one line for `lina presets`
  const char *equation; ///< the recurrence, column convention
  Spec spec;
  /// Other names it answers to: fla's, as in fla.ops.<alias>, so a user
  /// coming from fla can say `simple_gla` for mamba2. Never a preset's name.
  std::vector<const char *> aliases;
};

/// All presets, in the order of the table in docs/design.md.
const std::vector<Preset> &presets();

/// The presets' names, in order (for tests and option lists).
std::vector<std::string> presetNames();

/// The preset called `name`, by its name or one of its aliases, or
/// nullopt. The result keeps its own name (spec.name), so an alias and the
/// name give the same spec text and share cached kernels.
std::optional<Preset> findPreset(const std::string &name);

} // namespace lina

#endif // LINA_SPEC_PRESETS_H
