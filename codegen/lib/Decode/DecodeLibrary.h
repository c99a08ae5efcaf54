//===- DecodeLibrary.h - The decode device library's text -------*- C++ -*-===//
//
// Part of lina. Decode.cuh, embedded at build time.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_CODEGEN_DECODE_DECODELIBRARY_H
#define LINA_CODEGEN_DECODE_DECODELIBRARY_H

namespace lina::cuda {
const char *decodeLibrarySource();
} // namespace lina::cuda

#endif // LINA_CODEGEN_DECODE_DECODELIBRARY_H
