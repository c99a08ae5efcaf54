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
#include "lina/Reference/Backward.h"
#include "lina/Reference/Problem.h"

#include <string>

namespace lina {

/// Runs `program` over every sequence and value head of `problem`, whose spec
/// must be the program's. Returns false and sets `error` when the problem's
/// shapes are wrong or the program holds an op the executor does not know.
bool executeChunked(ChunkedOp program, const reference::Problem &problem,
                    reference::Result &result, std::string &error);

/// Runs `backward` (lina-chunk-backward's derivative of `forward`) over every
/// sequence and value head of `problem`: the gradients of
/// L = <dO, o> + <dFinalState, finalState> with respect to every input, in
/// the layouts runRecurrentBackward gives them. dFinalState may be empty
/// (zero). False with `error` on a mismatch or an unknown op.
bool executeChunkedBackward(ChunkedOp forward, ChunkedBackwardOp backward,
                            const reference::Problem &problem,
                            const std::vector<double> &dO,
                            const std::vector<double> &dFinalState,
                            reference::Gradients &gradients,
                            std::string &error);

} // namespace lina

#endif // LINA_CODEGEN_CPUEXECUTOR_H
