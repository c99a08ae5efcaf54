//===- lina-opt.cpp - The lina optimizer driver ------------------------===//
//
// Part of lina. MlirOptMain with the lina dialect and passes: what the lit
// tests drive.
//
//===----------------------------------------------------------------------===//
#include "lina/Dialect/Lina/IR/Lina.h"
#include "lina/Transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<lina::LinaDialect>();
  lina::registerLinaPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "lina optimizer driver\n", registry));
}
