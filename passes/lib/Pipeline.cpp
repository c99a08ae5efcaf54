//===- Pipeline.cpp - From a spec to its chunked program ---------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Transforms/Pipeline.h"
#include "lina/Dialect/Lina/IR/SpecConversion.h"
#include "lina/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"

using namespace mlir;

namespace lina {

OwningOpRef<ModuleOp> buildChunkedProgram(MLIRContext &ctx, const Spec &spec,
                                          const ChunkOptions &options,
                                          std::string &error) {
  ctx.loadDialect<LinaDialect>();
  std::vector<std::string> problems = validate(spec);
  if (!problems.empty()) {
    error = "invalid spec: " + problems.front();
    return nullptr;
  }
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
    diagnostics += diag.str() + "\n";
    return success();
  });
  OwningOpRef<ModuleOp> module = buildSpecModule(ctx, spec);
  PassManager pm(&ctx);
  if (options.specialize)
    pm.addPass(createLinaSpecialize());
  LinaChunkOptions chunk;
  chunk.chunkSize = options.chunkSize;
  chunk.testReadUpdatedState = options.testReadUpdatedState;
  pm.addPass(createLinaChunk(chunk));
  if (options.backward)
    addBackwardPasses(pm);
  if (failed(pm.run(*module))) {
    error = "lowering failed: " + diagnostics;
    return nullptr;
  }
  return module;
}

void addBackwardPasses(OpPassManager &pm) {
  pm.addPass(createLinaChunkBackward());
  pm.addPass(createLinaFuseSums());
}

Spec specializedSpec(const Spec &spec) {
  if (!validate(spec).empty())
    return spec;
  MLIRContext ctx;
  ScopedDiagnosticHandler quiet(&ctx, [](Diagnostic &) { return success(); });
  OwningOpRef<ModuleOp> module = buildSpecModule(ctx, spec);
  PassManager pm(&ctx);
  pm.addPass(createLinaSpecialize());
  if (failed(pm.run(*module)))
    return spec;
  Spec out = spec;
  for (RecurrenceOp op : module->getOps<RecurrenceOp>())
    out = toSpec(op.getSpec());
  out.name = spec.name;
  return out;
}

} // namespace lina
