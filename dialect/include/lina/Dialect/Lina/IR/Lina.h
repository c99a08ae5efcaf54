//===- Lina.h - The lina dialect, its attributes, types and ops -*- C++ -*-===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_DIALECT_LINA_IR_LINA_H
#define LINA_DIALECT_LINA_IR_LINA_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "mlir/IR/OpImplementation.h"

#include "lina/Dialect/Lina/IR/LinaEnums.h.inc"

namespace lina {
/// Parses a bare enum keyword; an unknown one is an error that lists
/// `allowed`, the valid spellings.
template <typename Symbolize>
auto parseEnumKeyword(mlir::AsmParser &parser, llvm::StringRef allowed,
                      Symbolize symbolize)
    -> mlir::FailureOr<std::remove_reference_t<decltype(*symbolize(""))>> {
  llvm::SMLoc loc = parser.getCurrentLocation();
  llvm::StringRef keyword;
  if (failed(parser.parseOptionalKeyword(&keyword)))
    return parser.emitError(loc) << "expected one of: " << allowed;
  if (auto value = symbolize(keyword))
    return *value;
  return parser.emitError(loc) << "'" << keyword << "' is not one of: "
                               << allowed;
}
} // namespace lina

#include "lina/Dialect/Lina/IR/LinaDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "lina/Dialect/Lina/IR/LinaAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "lina/Dialect/Lina/IR/LinaTypes.h.inc"

#define GET_OP_CLASSES
#include "lina/Dialect/Lina/IR/LinaOps.h.inc"

#endif // LINA_DIALECT_LINA_IR_LINA_H
