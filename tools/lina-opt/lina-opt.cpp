//===- lina-opt.cpp - The lina optimizer driver ------------------------===//
//
// Part of lina. MlirOptMain with the lina dialect and passes: what the lit
// tests drive. The input is read here first so that its nesting is bounded
// before MLIR's recursive parser sees it.
//
//===----------------------------------------------------------------------===//
#include "lina/Codegen/Passes.h"
#include "lina/Dialect/Lina/IR/Lina.h"
#include "lina/Dialect/Lina/IR/NestingDepth.h"
#include "lina/Transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<lina::LinaDialect>();
  lina::registerLinaPasses();
  lina::registerLinaCodegenPasses();
  auto [inputName, outputName] = mlir::registerAndParseCLIOptions(
      argc, argv, "lina optimizer driver\n", registry);
  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  if (config.shouldShowDialects())
    return mlir::asMainReturnCode(
        mlir::MlirOptMain(argc, argv, inputName, outputName, registry));

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      mlir::openInputFile(inputName, &error);
  if (!input) {
    llvm::errs() << "lina-opt: " << error << "\n";
    return 1;
  }
  if (auto tooDeep = lina::checkNestingDepth(input->getBuffer(), inputName)) {
    llvm::errs() << "lina-opt: error: " << *tooDeep << "\n";
    return 2;
  }
  std::unique_ptr<llvm::ToolOutputFile> output =
      mlir::openOutputFile(outputName, &error);
  if (!output) {
    llvm::errs() << "lina-opt: " << error << "\n";
    return 1;
  }
  if (mlir::failed(mlir::MlirOptMain(output->os(), std::move(input), registry,
                                     config)))
    return 1;
  output->keep();
  return 0;
}
