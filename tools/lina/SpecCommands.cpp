//===- SpecCommands.cpp - `lina presets` and `lina spec` ---------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "Commands.h"
#include "SpecJson.h"
#include "SpecSource.h"

#include "lina/Dialect/Lina/IR/SpecConversion.h"
#include "lina/Spec/Presets.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>

namespace lina::cli {

int presetsCommand(const std::vector<std::string> &args) {
  ArgParser p("presets", "",
              "List the built-in recurrences, with the names fla gives them "
              "where they differ (each name or alias is accepted wherever a "
              "preset is).");
  p.flag("json", "print them as a JSON array of objects (name, aliases, "
                 "description, equation, spec)");
  if (!p.parse(args))
    return 0;
  if (!p.positional().empty())
    throw UsageError("'lina presets' takes no arguments, got '" +
                     p.positional().front() + "'");
  if (p.has("json")) {
    llvm::json::Array all;
    for (const Preset &preset : presets()) {
      llvm::json::Array aliases;
      for (const char *alias : preset.aliases)
        aliases.push_back(alias);
      all.push_back(llvm::json::Object{{"name", preset.name},
                                       {"aliases", std::move(aliases)},
                                       {"description", preset.summary},
                                       {"equation", preset.equation},
                                       {"spec", specToJson(preset.spec)}});
    }
    llvm::outs() << llvm::formatv("{0:2}", llvm::json::Value(std::move(all)))
                 << "\n";
    return 0;
  }
  for (const Preset &preset : presets()) {
    std::printf("%-12s %s: %s", preset.name, preset.summary, preset.equation);
    // fla's name for it, where it has another, as fla.ops spells it.
    for (size_t i = 0; i < preset.aliases.size(); ++i)
      std::printf("%s%s", i ? ", " : " (alias: ", preset.aliases[i]);
    std::printf("%s\n", preset.aliases.empty() ? "" : ")");
  }
  return 0;
}

int specCommand(const std::vector<std::string> &args) {
  ArgParser p("spec", "<preset|file.mlir> [options]",
              "Print a spec as MLIR (a lina.recurrence that lina-opt and "
              "'lina run' accept).");
  addSpecOverrideOptions(p);
  if (!p.parse(args))
    return 0;
  if (p.positional().size() != 1)
    throw UsageError("expected one preset name or spec file (see 'lina "
                     "presets')");
  Spec spec = loadSpec(p.positional().front(), p);
  if (spec.name.empty())
    spec.name = p.positional().front();
  std::fputs(printSpecModule(spec).c_str(), stdout);
  return 0;
}

} // namespace lina::cli
