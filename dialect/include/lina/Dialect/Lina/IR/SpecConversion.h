//===- SpecConversion.h - #lina.spec <-> lina::Spec -------------*- C++ -*-===//
//
// Part of lina. The dialect is the textual form of lina::Spec; these two
// functions are the only place the two spellings meet.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_DIALECT_LINA_IR_SPECCONVERSION_H
#define LINA_DIALECT_LINA_IR_SPECCONVERSION_H

#include "lina/Dialect/Lina/IR/Lina.h"
#include "lina/Spec/Spec.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace lina {

/// The plain spec an attribute describes. `name` is left empty.
Spec toSpec(SpecAttr attr);

/// The attribute for `spec`; the spec should satisfy lina::validate.
SpecAttr toSpecAttr(mlir::MLIRContext *context, const Spec &spec);

/// The one lina.recurrence in `text` (its sym name becomes spec.name). On
/// failure returns false with the parser's or verifier's diagnostics, each
/// with its `bufferName:line:col`, in `error`.
bool parseSpecText(llvm::StringRef text, llvm::StringRef bufferName,
                   Spec &spec, std::string &error);

/// A new module holding `lina.recurrence @<spec.name> <...>` (named
/// `recurrence` where the spec has no name), the dialect loaded into
/// `context`; where the spec pipelines (specialize, choose a schedule,
/// chunk) start. The spec should satisfy lina::validate.
mlir::OwningOpRef<mlir::ModuleOp> buildSpecModule(mlir::MLIRContext &context,
                                                  const Spec &spec);

/// buildSpecModule's module, printed.
std::string printSpecModule(const Spec &spec);

} // namespace lina

#endif // LINA_DIALECT_LINA_IR_SPECCONVERSION_H
