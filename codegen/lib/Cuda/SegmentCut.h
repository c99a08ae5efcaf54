//===- SegmentCut.h - Whether a split chunk can run in segments -*- C++ -*-===//
//
// Part of lina. A sequence runs as P segments at once (Segments.cuh) when
// its state's only uses are a decay and a product into the output:
//   S' = decay_state(S, G) + U,   o = X S [+ Y],
// with U and Y independent of S, and the prepare kernel stores X (bf16) and
// the decay factors of G. Then a segment's outputs and final state from a
// zero start differ from the true ones by X Diag(prefix) start and
// Diag(D) start, which the combine and carry kernels add. This file checks
// the chunk and finds X and the factors in the workspace record.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_CODEGEN_CUDA_SEGMENTCUT_H
#define LINA_CODEGEN_CUDA_SEGMENTCUT_H

#include "StateSplit.h"

#include "lina/Spec/Spec.h"

#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>

namespace lina::cuda {

struct SegmentCut {
  int64_t queryOffset = 0;  ///< X: C rows of key_dim bf16 in the record
  int64_t factorOffset = 0; ///< the chunk's decay factors (fp32)
  int64_t gateColumns = 0;  ///< 1 (one gate a token) or key_dim
};

/// The cut of a split chunk, or nullopt with `why` saying what stops it.
std::optional<SegmentCut> segmentCut(ChunkedOp op, const StateSplit &split,
                                     std::string &why);

/// Prints the combine and carry kernels (`combine`, `carry`) of a plan
/// whose scan has `recordFloats` floats a workspace record; returns the
/// carry kernel's shared memory in bytes.
unsigned printSegmentKernels(llvm::raw_ostream &os, const Spec &spec,
                             int64_t chunkSize, int64_t threads,
                             const SegmentCut &cut, int64_t recordFloats,
                             llvm::StringRef combine, llvm::StringRef carry);

} // namespace lina::cuda

#endif // LINA_CODEGEN_CUDA_SEGMENTCUT_H
