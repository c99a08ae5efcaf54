//===- Prelude.h - The device library's source text -------------*- C++ -*-===//
//
// Part of lina. Prelude.cuh, embedded at build time.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_CODEGEN_CUDA_PRELUDE_H
#define LINA_CODEGEN_CUDA_PRELUDE_H

namespace lina::cuda {
const char *preludeSource();
} // namespace lina::cuda

#endif // LINA_CODEGEN_CUDA_PRELUDE_H
