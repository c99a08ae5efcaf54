//===- FetchRing.h - The fetch ring the emitter would choose ----*- C++ -*-===//
//
// Part of lina. lina-pipeline-loads asks the emitter's layout which ring of
// buffers the kernel that walks a chunk's chunks can fetch its tiles into
// without costing occupancy that matters (KernelPrinter::ringDepth).
//
//===----------------------------------------------------------------------===//
#ifndef LINA_CODEGEN_CUDA_FETCHRING_H
#define LINA_CODEGEN_CUDA_FETCHRING_H

#include "lina/Dialect/Lina/IR/Lina.h"

#include <cstdint>
#include <optional>

namespace lina::cuda {

/// The buffers a fetched tile gets in `op`'s walking kernel under its
/// schedule and records (0: the kernel fetches nothing ahead, the schedule
/// not asking for prefetch or the buffers not fitting), or nullopt where
/// `op` cannot be printed (the emitter says why).
std::optional<int64_t> chooseFetchRing(ChunkedOp op);

} // namespace lina::cuda

#endif // LINA_CODEGEN_CUDA_FETCHRING_H
