//===- CpuExecutor.h - Run a chunked program in float64 ---------*- C++ -*-===//
//
// Part of lina. The CPU backend: interprets the tile ops of a lina.chunked
// body chunk by chunk, in float64, so the chunkwise algorithm the passes
// produce can be checked against the reference on any machine.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_CODEGEN_CPUEXECUTOR_H
#define LINA_CODEGEN_CPUEXECUTOR_H

#include "lina/Dialect/Lina/IR/Lina.h"
#include "lina/Reference/Problem.h"

#include <string>

namespace lina {

/// Runs `program` over every sequence and value head of `problem`, whose spec
/// must be the program's. Returns false and sets `error` when the problem's
/// shapes are wrong or the program holds an op the executor does not know.
bool executeChunked(ChunkedOp program, const reference::Problem &problem,
                    reference::Result &result, std::string &error);

} // namespace lina

#endif // LINA_CODEGEN_CPUEXECUTOR_H
