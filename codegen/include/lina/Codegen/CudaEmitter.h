//===- CudaEmitter.h - From a spec to CUDA C++ ------------------*- C++ -*-===//
//
// Part of lina. The JIT front half: spec -> lina-specialize -> lina-chunk ->
// lina-schedule -> CUDA C++ (a KernelPlan the runtime compiles and launches).
//
//===----------------------------------------------------------------------===//
#ifndef LINA_CODEGEN_CUDAEMITTER_H
#define LINA_CODEGEN_CUDAEMITTER_H

#include "lina/Runtime/ChunkKernel.h"
#include "lina/Spec/Spec.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace lina {

/// The knobs of lina-schedule (and of the autotuner).
struct ScheduleOptions {
  int64_t chunkSize = 64;
  int64_t tileV = 64; ///< value columns per CTA; divides value_dim
  int64_t warps = 4;
  Strategy strategy = Strategy::FusedScan;
};

/// A sensible schedule for `spec` when nothing was tuned.
ScheduleOptions defaultSchedule(const Spec &spec);

/// spec -> lina-specialize -> lina-chunk -> lina-schedule, as a module; null
/// with `error` set when a pass rejects the options.
mlir::OwningOpRef<mlir::ModuleOp>
buildScheduledProgram(mlir::MLIRContext &context, const Spec &spec,
                      const ScheduleOptions &options, std::string &error);

/// Runs the whole pipeline and prints the kernel(s). Errors name the problem
/// (e.g. shared memory over the limit for this chunk size and tile).
Expected<KernelPlan> planChunkKernel(const Spec &spec,
                                     const ScheduleOptions &options);

/// Prints the CUDA C++ for a module holding one scheduled lina.chunked.
Expected<KernelPlan> emitCuda(mlir::ModuleOp module);

} // namespace lina

#endif // LINA_CODEGEN_CUDAEMITTER_H
