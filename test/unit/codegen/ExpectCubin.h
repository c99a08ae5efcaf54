//===- ExpectCubin.h - A kernel source compiles to a cubin ------*- C++ -*-===//
//
// Part of lina's codegen tests: NVRTC (no GPU needed) compiles a generated
// source for sm_90, and the result is an ELF cubin.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TEST_CODEGEN_EXPECTCUBIN_H
#define LINA_TEST_CODEGEN_EXPECTCUBIN_H

#include "lina/Runtime/Nvrtc.h"

#include <gtest/gtest.h>

#include <string>

namespace lina::test {

/// Use with ASSERT_NO_FATAL_FAILURE; the caller skips when NVRTC is missing.
inline void expectCubinForSm90(const std::string &source) {
  cuda::CompileOptions options;
  options.arch = "sm_90";
  Expected<cuda::CompiledKernel> compiled =
      cuda::Nvrtc::get().compile(source, options);
  ASSERT_TRUE(compiled.ok()) << compiled.message();
  EXPECT_EQ(compiled->cubin.substr(0, 4), std::string("\x7f"
                                                      "ELF"));
}

} // namespace lina::test

#endif // LINA_TEST_CODEGEN_EXPECTCUBIN_H
