//===- SpecPipelineFuzzer.cpp - spec text -> CUDA, under libFuzzer -----===//
//
// Part of lina. Any bytes: parse as MLIR with the lina dialect, verify, and
// for a module holding one valid lina.recurrence run the whole pipeline to
// CUDA text (specialize, chunk, schedule, emit) for each strategy, the
// backward's (chunk-backward, fuse-sums, its kernels) and the decode
// planner. Every outcome must be a diagnostic or a kernel; a crash,
// assertion or sanitizer report is a bug.
//
//===----------------------------------------------------------------------===//
#include "lina/Codegen/CudaEmitter.h"
#include "lina/Codegen/DecodePlanner.h"
#include "lina/Codegen/KernelPlanner.h"
#include "lina/Dialect/Lina/IR/SpecConversion.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  lina::Spec spec;
  std::string error;
  if (!lina::parseSpecText(text, "fuzz", spec, error))
    return 0;
  // Keep each input cheap: the pipeline's cost grows with the chunk size,
  // not with the dims, which the verifier already bounds. One schedule per
  // strategy: the default (16-token chunks, prefetching, for most forms),
  // materialize at 64, split at 32.
  struct Variant {
    int64_t chunk;
    lina::Strategy strategy;
  };
  for (Variant v : {Variant{16, lina::Strategy::FusedScan},
                    Variant{64, lina::Strategy::Materialize},
                    Variant{32, lina::Strategy::Split}}) {
    lina::ScheduleOptions options = lina::defaultSchedule(spec);
    options.chunkSize = v.chunk;
    options.strategy = v.strategy;
    lina::Expected<lina::KernelPlan> plan =
        lina::planChunkKernel(spec, options);
    if (plan.ok() && plan->source.find("__global__") == std::string::npos)
      __builtin_trap(); // a plan without a kernel is a bug, not an input
  }
  // The backward at its default layout.
  lina::Expected<lina::BackwardPlan> backward =
      lina::planBackwardKernel(spec, {});
  if (backward.ok() &&
      backward->source.find("__global__") == std::string::npos)
    __builtin_trap();
  lina::Expected<lina::DecodePlan> decode = lina::planDecodeKernel(spec);
  if (decode.ok() && (decode->kernelNames.empty() ||
                      decode->source.find("__global__") == std::string::npos))
    __builtin_trap();
  return 0;
}
