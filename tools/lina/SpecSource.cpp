//===- SpecSource.cpp - A spec from a preset name or an .mlir file -----===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "SpecSource.h"

#include "lina/Dialect/Lina/IR/SpecConversion.h"
#include "lina/Spec/Presets.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace lina::cli {

void addSpecOverrideOptions(ArgParser &p) {
  p.option("dk", "N", "key head dimension");
  p.option("dv", "N", "value head dimension");
  p.option("heads", "N", "heads of q and k");
  p.option("value-heads", "N",
           "heads of v, gates and beta (a multiple of --heads)");
  p.option("dtype", "bf16|f16|f32", "input dtype");
}

static Spec parseSpecFile(const std::string &path) {
  std::string error;
  auto file = llvm::MemoryBuffer::getFile(path);
  if (!file)
    throw UsageError("cannot read '" + path + "': " + file.getError().message() +
                     " (expected a preset name or a .mlir spec file; "
                     "'lina presets' lists the presets)");
  MLIRContext ctx;
  ctx.loadDialect<LinaDialect>();
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(*file), llvm::SMLoc());
  std::string diagnostics;
  llvm::raw_string_ostream diagOS(diagnostics);
  SourceMgrDiagnosticHandler handler(sourceMgr, &ctx, diagOS);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &ctx);
  if (!module)
    throw UsageError("invalid spec file:\n" + diagnostics);
  SmallVector<RecurrenceOp> specs;
  module->walk([&](RecurrenceOp op) { specs.push_back(op); });
  if (specs.size() != 1)
    throw UsageError("'" + path + "' must hold exactly one lina.recurrence, "
                     "found " + std::to_string(specs.size()));
  Spec spec = toSpec(specs.front().getSpec());
  spec.name = specs.front().getSymName().str();
  return spec;
}

Spec loadSpec(const std::string &source, const ArgParser &p) {
  Spec spec;
  if (std::optional<Preset> preset = findPreset(source))
    spec = preset->spec;
  else if (source.find('/') != std::string::npos ||
           source.find(".mlir") != std::string::npos)
    spec = parseSpecFile(source);
  else
    throw UsageError("unknown preset '" + source +
                     "' ('lina presets' lists them; a spec file needs a "
                     ".mlir suffix or a path)");
  constexpr int64_t kMax = 1 << 20;
  spec.keyDim = p.getInt("dk", 1, kMax, spec.keyDim);
  spec.valueDim = p.getInt("dv", 1, kMax, spec.valueDim);
  spec.heads = p.getInt("heads", 1, kMax, spec.heads);
  bool grouped = p.has("value-heads");
  spec.valueHeads = p.getInt("value-heads", 1, kMax,
                             grouped ? 0 : spec.heads);
  if (p.has("dtype")) {
    std::optional<DType> dtype = parseDType(p.get("dtype"));
    if (!dtype)
      throw UsageError("--dtype must be bf16, f16 or f32, got '" +
                       p.get("dtype") + "'");
    spec.dtype = *dtype;
  }
  std::vector<std::string> errors = validate(spec);
  if (!errors.empty())
    throw UsageError("invalid spec: " + errors.front());
  return spec;
}

} // namespace lina::cli
