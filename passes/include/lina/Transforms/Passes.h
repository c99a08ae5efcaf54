//===- Passes.h - lina passes -----------------------------------*- C++ -*-===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TRANSFORMS_PASSES_H
#define LINA_TRANSFORMS_PASSES_H

#include "lina/Dialect/Lina/IR/Lina.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace lina {

#define GEN_PASS_DECL
#include "lina/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "lina/Transforms/Passes.h.inc"

} // namespace lina

#endif // LINA_TRANSFORMS_PASSES_H
