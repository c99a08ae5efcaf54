//===- SpecPipelineFuzzer.cpp - spec text -> CUDA, under libFuzzer -----===//
//
// Part of lina. Any bytes: parse as MLIR with the lina dialect, verify, and
// for a module holding one valid lina.recurrence run the whole pipeline to
// CUDA text (specialize, chunk, schedule, emit). Every outcome must be a
// diagnostic or a kernel; a crash, assertion or sanitizer report is a bug.
//
//===----------------------------------------------------------------------===//
#include "lina/Codegen/CudaEmitter.h"
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
  // not with the dims, which the verifier already bounds.
  for (int64_t chunk : {16, 64}) {
    lina::ScheduleOptions options = lina::defaultSchedule(spec);
    options.chunkSize = chunk;
    options.strategy = chunk == 16 ? lina::Strategy::FusedScan
                                   : lina::Strategy::Materialize;
    lina::Expected<lina::KernelPlan> plan =
        lina::planChunkKernel(spec, options);
    if (plan.ok() && plan->source.find("__global__") == std::string::npos)
      __builtin_trap(); // a plan without a kernel is a bug, not an input
  }
  return 0;
}
