//===- SumTerms.h - lina.sum's terms in the assembly ----------*- C++ -*-===//
//
// Part of lina. The custom directive of lina.sum's assembly format: terms
// `%x` or `%x * %y`, comma-separated, the subtracted ones after `minus`;
// `factors` records which are products.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_DIALECT_LINA_IR_SUMTERMS_H
#define LINA_DIALECT_LINA_IR_SUMTERMS_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpImplementation.h"

namespace lina {

mlir::ParseResult parseSumTerms(
    mlir::OpAsmParser &parser,
    llvm::SmallVectorImpl<mlir::OpAsmParser::UnresolvedOperand> &added,
    llvm::SmallVectorImpl<mlir::OpAsmParser::UnresolvedOperand> &subtracted,
    mlir::DenseI64ArrayAttr &factors);

void printSumTerms(mlir::OpAsmPrinter &printer, mlir::Operation *op,
                   mlir::OperandRange added, mlir::OperandRange subtracted,
                   mlir::DenseI64ArrayAttr factors);

} // namespace lina

#endif // LINA_DIALECT_LINA_IR_SUMTERMS_H
