//===- CudaEmitter.h - Scheduled chunked programs as CUDA C++ ---*- C++ -*-===//
//
// Part of lina. The MLIR side of the planner (KernelPlanner.h): the scheduled
// module, and the translation that prints it.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_CODEGEN_CUDAEMITTER_H
#define LINA_CODEGEN_CUDAEMITTER_H

#include "lina/Codegen/KernelPlanner.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace lina {

/// spec -> lina-specialize -> lina-chunk (-> lina-chunk-backward with
/// `backward`) -> lina-schedule, as a module; null with `error` set when a
/// pass rejects the options. A backward's gradients kernel groups its ops
/// `barrierWindow` places (lina-group-barriers; 0: not at all).
mlir::OwningOpRef<mlir::ModuleOp>
buildScheduledProgram(mlir::MLIRContext &context, const Spec &spec,
                      const ScheduleOptions &options, std::string &error,
                      bool backward = false, int64_t barrierWindow = 0);

/// The module planBackwardKernel prints: the spec's forward and its
/// backward, chunked and scheduled as `options` asks (0: the default
/// layout's), through every planning pass; null with `error` set when a
/// pass rejects them.
mlir::OwningOpRef<mlir::ModuleOp>
buildBackwardProgram(mlir::MLIRContext &context, const Spec &spec,
                     const BackwardScheduleOptions &options,
                     std::string &error);

/// Prints the CUDA C++ for a module holding one scheduled lina.chunked.
Expected<KernelPlan> emitCuda(mlir::ModuleOp module);

/// Prints the CUDA C++ of the backward for a module holding one lina.chunked
/// and its scheduled lina.chunked_backward (BackwardKernel.h's two kernels).
Expected<BackwardPlan> emitCudaBackward(mlir::ModuleOp module);

} // namespace lina

#endif // LINA_CODEGEN_CUDAEMITTER_H
