//===- OpVerification.h - What the ops' verifiers share ---------*- C++ -*-===//
//
// Part of lina. The forward's tile ops (LinaOps.cpp) and the backward's
// (LinaGradOps.cpp) check shapes against the spec and chunk size of
// whichever chunked op holds them.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_DIALECT_LINA_IR_OPVERIFICATION_H
#define LINA_DIALECT_LINA_IR_OPVERIFICATION_H

#include "lina/Dialect/Lina/IR/Lina.h"
#include "lina/Spec/Spec.h"

#include <string>

namespace lina {

/// The spec and chunk size of the lina.chunked or lina.chunked_backward
/// holding a tile op.
struct ChunkedContext {
  SpecAttr spec;
  int64_t chunkSize;
};
ChunkedContext chunkedContext(mlir::Operation *op);

/// "16x128".
std::string shapeStr(TileType t);

/// A chunk size is a power of two from 1 to 256.
mlir::LogicalResult verifyChunkSize(mlir::Operation *op, int64_t chunkSize);

/// A chunked op's #lina.schedule (when it has one) fits its spec: value
/// tiles of a multiple of 8 columns dividing value_dim, 1 to 16 warps (a
/// power of two), 1 to 16 segments.
mlir::LogicalResult verifySchedule(mlir::Operation *op, SpecAttr spec,
                                   ScheduleAttr schedule);

/// Columns of `operand` under `spec`, or -1 when the spec has no such input.
int64_t operandColumns(ir::Operand operand, const Spec &spec);

/// A computed gate's source and its lower bound agree (lina.gate and
/// lina.gate_grad).
mlir::LogicalResult verifyGateSource(mlir::Operation *op,
                                     ir::GateSource source, bool hasBound);

} // namespace lina

#endif // LINA_DIALECT_LINA_IR_OPVERIFICATION_H
