//===- lina-translate.cpp - lina's translations ------------------------===//
//
// Part of lina. `--emit-cuda`: a module holding one scheduled lina.chunked
// printed as CUDA C++ (what the lit tests pin); `--emit-cuda-backward`: one
// with its scheduled lina.chunked_backward, printed as the backward's
// kernels.
//
//===----------------------------------------------------------------------===//
#include "lina/Codegen/CudaEmitter.h"
#include "lina/Dialect/Lina/IR/Lina.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"

int main(int argc, char **argv) {
  mlir::TranslateFromMLIRRegistration emitCuda(
      "emit-cuda", "print a scheduled lina.chunked as CUDA C++",
      [](mlir::Operation *op, llvm::raw_ostream &os) -> mlir::LogicalResult {
        auto module = llvm::dyn_cast<mlir::ModuleOp>(op);
        if (!module)
          return op->emitError("expected a builtin.module");
        lina::Expected<lina::KernelPlan> plan = lina::emitCuda(module);
        if (!plan.ok())
          return op->emitError(plan.message());
        os << plan->source;
        return mlir::success();
      },
      [](mlir::DialectRegistry &registry) {
        registry.insert<lina::LinaDialect>();
      });
  mlir::TranslateFromMLIRRegistration emitCudaBackward(
      "emit-cuda-backward",
      "print a lina.chunked and its scheduled lina.chunked_backward as the "
      "backward's CUDA C++",
      [](mlir::Operation *op, llvm::raw_ostream &os) -> mlir::LogicalResult {
        auto module = llvm::dyn_cast<mlir::ModuleOp>(op);
        if (!module)
          return op->emitError("expected a builtin.module");
        lina::Expected<lina::BackwardPlan> plan =
            lina::emitCudaBackward(module);
        if (!plan.ok())
          return op->emitError(plan.message());
        os << plan->source;
        return mlir::success();
      },
      [](mlir::DialectRegistry &registry) {
        registry.insert<lina::LinaDialect>();
      });
  return mlir::failed(mlir::mlirTranslateMain(argc, argv, "lina translations"));
}
