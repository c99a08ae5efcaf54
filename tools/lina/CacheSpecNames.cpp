//===- CacheSpecNames.cpp - A name for a tuning result without one -----===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "CacheSpecNames.h"

#include "lina/Autotune/BackwardTuning.h"
#include "lina/Autotune/CacheKeys.h"
#include "lina/Autotune/TunedLookup.h"
#include "lina/Spec/Presets.h"

#include <cstdlib>
#include <map>
#include <sstream>

namespace lina::cli {

std::string presetNameForSpecText(const std::string &text) {
  // A decode tune's key is its spec's text without state flags, marked; a
  // backward tune's is its spec's text, marked.
  std::string specText = text;
  for (const std::string mark : {"decode ", kBackwardKeyPrefix})
    if (specText.compare(0, mark.size(), mark) == 0)
      specText = specText.substr(mark.size());
  // "field=value" words: the text's dims, heads and dtype are what a
  // preset's command-line overrides change (--dk, --dv, --heads, --dtype).
  std::map<std::string, std::string> fields;
  std::istringstream words(specText);
  for (std::string word; words >> word;) {
    size_t eq = word.find('=');
    if (eq != std::string::npos)
      fields[word.substr(0, eq)] = word.substr(eq + 1);
  }
  auto number = [&](const char *name) -> int64_t {
    auto it = fields.find(name);
    return it == fields.end() ? 0 : std::strtoll(it->second.c_str(), nullptr, 10);
  };
  std::optional<DType> dtype = parseDType(fields["dtype"]);
  if (!dtype)
    return "";
  for (const Preset &preset : presets()) {
    Spec spec = preset.spec;
    spec.keyDim = number("key_dim");
    spec.valueDim = number("value_dim");
    spec.heads = number("heads");
    spec.valueHeads = number("value_heads");
    spec.dtype = *dtype;
    Spec stateless = spec;
    stateless.initialState = stateless.finalState = false;
    for (const Spec &candidate : {spec, stateless, tuningFamily(spec)})
      if (cache::canonicalSpecText(candidate) == specText)
        return preset.name;
  }
  return "";
}

} // namespace lina::cli
