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
};

/// All presets, in the order of the table in docs/design.md.
const std::vector<Preset> &presets();

/// The presets' names, in order (for tests and option lists).
std::vector<std::string> presetNames();

/// The preset called `name`, or nullopt.
std::optional<Preset> findPreset(const std::string &name);

} // namespace lina

#endif // LINA_SPEC_PRESETS_H
