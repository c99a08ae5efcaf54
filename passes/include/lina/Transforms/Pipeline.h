//===- Pipeline.h - From a spec to its chunked program ----------*- C++ -*-===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TRANSFORMS_PIPELINE_H
#define LINA_TRANSFORMS_PIPELINE_H

#include "lina/Dialect/Lina/IR/Lina.h"
#include "lina/Spec/Spec.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Pass/PassManager.h"

#include <string>

namespace lina {

struct ChunkOptions {
  int64_t chunkSize = 64;
  bool specialize = true;
  bool testReadUpdatedState = false; ///< see the lina-chunk pass option
  /// Also derive the backward (addBackwardPasses): the module then holds
  /// the program's lina.chunked_backward after its lina.chunked.
  bool backward = false;
};

/// A module holding one lina.chunked for `spec`, after lina-specialize (when
/// asked) and lina-chunk. Null with `error` set on failure.
mlir::OwningOpRef<mlir::ModuleOp>
buildChunkedProgram(mlir::MLIRContext &context, const Spec &spec,
                    const ChunkOptions &options, std::string &error);

/// The passes that derive a chunked program's backward: lina-chunk-backward,
/// then lina-fuse-sums on what it wrote.
void addBackwardPasses(mlir::OpPassManager &pm);

/// `spec` as lina-specialize rewrites it: the cheapest form that computes it
/// (a DPLR spec whose vectors are tied to k as KDA's are is KDA). Planner
/// decisions go by it, so that equivalent specs get the same kernel. `spec`
/// itself where it does not verify.
Spec specializedSpec(const Spec &spec);

} // namespace lina

#endif // LINA_TRANSFORMS_PIPELINE_H
