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

#include "lina/Dialect/Lina/IR/LinaDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "lina/Dialect/Lina/IR/LinaAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "lina/Dialect/Lina/IR/LinaTypes.h.inc"

#define GET_OP_CLASSES
#include "lina/Dialect/Lina/IR/LinaOps.h.inc"

#endif // LINA_DIALECT_LINA_IR_LINA_H
