//===- DeepNestingTest.cpp - Deeply nested specs through the C API -----===//
//
// Part of lina. MLIR's parser recurses once per bracket level, so a spec
// nested deep enough overflows the stack of the thread that parses it: the
// host program would die. lina refuses such text before parsing; these
// tests parse on a thread with a small stack, as an application's worker
// thread may have, and expect an error and a live process.
//
//===----------------------------------------------------------------------===//
#include "lina/lina_c.h"

#include <gtest/gtest.h>

#include <pthread.h>

#include <string>

namespace {

/// A worker thread's stack. Sanitizers multiply frame sizes, so they get
/// more.
#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kStackBytes = 1024 * 1024;
#else
constexpr size_t kStackBytes = 256 * 1024;
#endif

struct Call {
  std::string specText;
  lina_status status = LINA_OK;
  std::string message;
};

void *checkOnThread(void *arg) {
  Call &call = *static_cast<Call *>(arg);
  lina_forward_args args = {};
  call.status = lina_check_forward_args(call.specText.c_str(), nullptr, &args);
  call.message = lina_last_error();
  return nullptr;
}

/// lina_check_forward_args(text) on a fresh thread of kStackBytes.
Call checkOnSmallStack(std::string text) {
  Call call;
  call.specText = std::move(text);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kStackBytes);
  pthread_t thread;
  EXPECT_EQ(pthread_create(&thread, &attr, checkOnThread, &call), 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  return call;
}

std::string repeat(const std::string &piece, int times) {
  std::string text;
  for (int i = 0; i < times; ++i)
    text += piece;
  return text;
}

TEST(DeepNesting, EveryBracketKindIsRefusedBeforeParsing) {
  const std::string spec =
      "lina.recurrence @x <decay = none, update = additive, key_dim = 16, "
      "value_dim = 16, heads = 1, value_heads = 1, dtype = bf16>";
  for (const std::string &open :
       {std::string("module {"), std::string("["), std::string("("),
        std::string("tuple<"), std::string("loc(fused[")}) {
    SCOPED_TRACE(open);
    Call call = checkOnSmallStack(repeat(open, 5000) + spec);
    EXPECT_EQ(call.status, LINA_INVALID_ARGUMENT);
    EXPECT_NE(call.message.find("levels of brackets deep; lina parses at "
                                "most 64"),
              std::string::npos)
        << call.message;
  }
}

TEST(DeepNesting, TheLimitItselfParsesOnASmallStack) {
  // 64 levels reach the parser (and fail there: nested modules hold no
  // spec); the thread's stack must hold that recursion.
  Call call = checkOnSmallStack(repeat("module {", 64) + repeat("}", 64));
  EXPECT_EQ(call.status, LINA_INVALID_ARGUMENT);
  EXPECT_NE(call.message.find("must hold exactly one lina.recurrence"),
            std::string::npos)
      << call.message;
  Call deeper = checkOnSmallStack(repeat("module {", 65) + repeat("}", 65));
  EXPECT_NE(deeper.message.find("nests 65 levels"), std::string::npos)
      << deeper.message;
}

TEST(DeepNesting, BracketsInStringsAndCommentsDoNotCount) {
  std::string text = "// " + repeat("{", 500) + "\n" +
                     "module attributes {x = \"" + repeat("[", 500) +
                     "\"} {}";
  Call call = checkOnSmallStack(text);
  // Refused by the parser for what the text says, not for its depth.
  EXPECT_EQ(call.status, LINA_INVALID_ARGUMENT);
  EXPECT_EQ(call.message.find("levels of brackets"), std::string::npos)
      << call.message;
  EXPECT_NE(call.message.find("spec:2:1: error:"), std::string::npos)
      << call.message;
}

} // namespace
