//===- SpecSource.cpp - A spec from a preset name or an .mlir file -----===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "SpecSource.h"

#include "lina/Dialect/Lina/IR/SpecConversion.h"
#include "lina/Dialect/Lina/IR/Spelling.h"
#include "lina/Spec/Presets.h"

#include "llvm/Support/MemoryBuffer.h"

namespace lina::cli {

void addSpecOverrideOptions(ArgParser &p) {
  p.option("dk", "N", "key head dimension");
  p.option("dv", "N", "value head dimension");
  p.option("heads", "N",
           "heads of q and k (value heads follow where the spec has as many)");
  p.option("value-heads", "N",
           "heads of v, gates and beta (a multiple of --heads; default: the "
           "spec's)");
  p.option("dtype", "bf16|f16|f32", "input dtype");
}

static Spec parseSpecFile(const std::string &path) {
  // "-" is standard input, as for cat and git.
  auto file = path == "-" ? llvm::MemoryBuffer::getSTDIN()
                          : llvm::MemoryBuffer::getFile(path);
  if (!file)
    throw UsageError("cannot read '" + path +
                     "': " + file.getError().message() +
                     " (expected a preset name or a .mlir spec file; "
                     "'lina presets' lists the presets)");
  Spec spec;
  std::string error;
  if (!parseSpecText((*file)->getBuffer(), path, spec, error))
    throw UsageError(error);
  return spec;
}

Spec loadSpec(const std::string &source, const ArgParser &p) {
  Spec spec;
  if (std::optional<Preset> preset = findPreset(source))
    spec = preset->spec;
  else if (source == "-" || source.find('/') != std::string::npos ||
           source.find(".mlir") != std::string::npos)
    spec = parseSpecFile(source);
  else {
    std::string suggestion = suggestPreset(source);
    throw UsageError("unknown preset '" + source + "'" +
                     (suggestion.empty() ? "" : "; " + suggestion) +
                     " ('lina presets' lists them; a spec file needs a "
                     ".mlir suffix or a path, and '-' reads standard input)");
  }
  constexpr int64_t kMax = 1 << 20;
  spec.keyDim = p.getInt("dk", 1, kMax, spec.keyDim);
  spec.valueDim = p.getInt("dv", 1, kMax, spec.valueDim);
  // The spec's fields stand unless a flag names them; only an ungrouped
  // spec's value heads follow --heads, so that it stays ungrouped.
  bool ungrouped = spec.valueHeads == spec.heads;
  spec.heads = p.getInt("heads", 1, kMax, spec.heads);
  spec.valueHeads = p.getInt("value-heads", 1, kMax,
                             ungrouped ? spec.heads : spec.valueHeads);
  if (p.has("dtype")) {
    std::optional<DType> dtype = parseDType(p.get("dtype"));
    if (!dtype) {
      llvm::StringRef near =
          closestSpelling(p.get("dtype"), {"bf16", "f16", "f32"});
      throw UsageError(
          "--dtype must be bf16, f16 or f32, got '" + p.get("dtype") + "'" +
          (near.empty() ? "" : " (did you mean '" + near.str() + "'?)"));
    }
    spec.dtype = *dtype;
  }
  std::vector<std::string> errors = validate(spec);
  if (!errors.empty())
    throw UsageError("invalid spec: " + errors.front());
  return spec;
}

void addShapeOption(ArgParser &p) {
  p.option("shape", "B,T,H[,HV]", "batch, tokens, heads [, value heads]");
}

void takeShapeHeads(const ArgParser &p, const ProblemShape &shape,
                    const std::string &command, Spec &spec) {
  for (const char *headsFlag : {"heads", "value-heads"})
    if (p.has(headsFlag))
      throw UsageError(std::string("--") + headsFlag + ": " + command +
                       " takes the heads from --shape B,T,H[,HV]");
  int64_t group = spec.valueHeads / spec.heads;
  spec.heads = shape.heads;
  spec.valueHeads =
      shape.valueHeadsGiven ? shape.valueHeads : shape.heads * group;
  std::vector<std::string> errors = validate(spec);
  if (!errors.empty())
    throw UsageError("invalid spec: " + errors.front());
}

ProblemShape parseShapeOption(const ArgParser &p) {
  if (!p.has("shape"))
    throw UsageError("--shape B,T,H[,HV] is required");
  std::vector<int64_t> shape =
      parseIntList(p.get("shape"), 0, 1 << 24, "--shape");
  if (shape.size() < 3 || shape.size() > 4)
    throw UsageError("--shape expects B,T,H or B,T,H,HV, got '" +
                     p.get("shape") + "'");
  if (shape[0] < 1 || shape[2] < 1 || (shape.size() == 4 && shape[3] < 1))
    throw UsageError("--shape: B, H and HV must be at least 1");
  return {shape[0], shape[1], shape[2],
          shape.size() == 4 ? shape[3] : shape[2], shape.size() == 4};
}

} // namespace lina::cli
