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

namespace {

/// A translation printing the source of the plan `emit` makes of a module.
template <typename Emit>
mlir::TranslateFromMLIRRegistration emitting(llvm::StringRef name,
                                             llvm::StringRef description,
                                             Emit emit) {
  return mlir::TranslateFromMLIRRegistration(
      name, description,
      [emit](mlir::Operation *op, llvm::raw_ostream &os) -> mlir::LogicalResult {
        auto module = llvm::dyn_cast<mlir::ModuleOp>(op);
        if (!module)
          return op->emitError("expected a builtin.module");
        auto plan = emit(module);
        if (!plan.ok())
          return op->emitError(plan.message());
        os << plan->source;
        return mlir::success();
      },
      [](mlir::DialectRegistry &registry) {
        registry.insert<lina::LinaDialect>();
      });
}

} // namespace

int main(int argc, char **argv) {
  auto emitCuda = emitting("emit-cuda",
                           "print a scheduled lina.chunked as CUDA C++",
                           lina::emitCuda);
  auto emitCudaBackward = emitting(
      "emit-cuda-backward",
      "print a lina.chunked and its scheduled lina.chunked_backward as the "
      "backward's CUDA C++",
      lina::emitCudaBackward);
  return mlir::failed(mlir::mlirTranslateMain(argc, argv, "lina translations"));
}
