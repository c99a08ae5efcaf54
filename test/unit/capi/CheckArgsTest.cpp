//===- CheckArgsTest.cpp - The C API's argument rejections, no GPU -------===//
//
// Part of lina. lina_check_forward_args runs what lina_kernel_forward checks
// before launching, so every rejection is seen through liblina.so without a
// GPU: the status, the message, and LINA_OK for a good call. Pointers are
// made-up addresses; nothing dereferences them.
//
//===----------------------------------------------------------------------===//
#include "lina/lina_c.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace {

/// Tensors 64 GiB apart never overlap.
void *at(int slot, uint64_t offset = 0) {
  return reinterpret_cast<void *>((uint64_t(slot + 1) << 36) + offset);
}

class CheckArgs : public ::testing::Test {
protected:
  void SetUp() override {
    char *text = nullptr;
    ASSERT_EQ(lina_preset_spec("gdn", 64, 64, 2, 2, "bf16", &text), LINA_OK)
        << lina_last_error();
    spec = text;
    lina_free_string(text);
    args.q = at(0);
    args.k = at(1);
    args.v = at(2);
    args.g = static_cast<const float *>(at(3));
    args.beta = static_cast<const float *>(at(4));
    args.o = at(5);
    args.initial_state = static_cast<const float *>(at(6));
    args.final_state = static_cast<float *>(at(7));
    args.batch = 2;
    args.seq_len = 100;
  }

  /// The status of checking `args`; `message` holds lina_last_error().
  lina_status check() {
    lina_status s = lina_check_forward_args(spec.c_str(), nullptr, &args);
    message = lina_last_error();
    return s;
  }

  std::string spec, message;
  lina_forward_args args = {};
};

TEST_F(CheckArgs, AGoodCallPasses) {
  EXPECT_EQ(check(), LINA_OK) << message;
  EXPECT_EQ(message, "");
}

TEST_F(CheckArgs, MisalignedPointer) {
  args.k = at(1, 1);
  EXPECT_EQ(check(), LINA_INVALID_ARGUMENT);
  EXPECT_NE(message.find("'k' (0x"), std::string::npos) << message;
  EXPECT_NE(message.find("is not aligned to"), std::string::npos) << message;
}

TEST_F(CheckArgs, OutputOverlappingAnInput) {
  args.o = static_cast<char *>(at(2)) + 64; // inside v
  EXPECT_EQ(check(), LINA_INVALID_ARGUMENT);
  EXPECT_NE(message.find("'o' (0x"), std::string::npos) << message;
  EXPECT_NE(message.find("overlaps 'v'"), std::string::npos) << message;
}

TEST_F(CheckArgs, MissingAndStrayTensors) {
  args.beta = nullptr;
  EXPECT_EQ(check(), LINA_INVALID_ARGUMENT);
  EXPECT_NE(message.find("'beta' is required"), std::string::npos) << message;
  args.beta = static_cast<const float *>(at(4));
  args.a = at(8);
  EXPECT_EQ(check(), LINA_INVALID_ARGUMENT);
  EXPECT_NE(message.find("'a' was given"), std::string::npos) << message;
}

TEST_F(CheckArgs, InputsTheSpecNamesPassWhereItsKernelReadsFewer) {
  // GLA with a write gate in the dplr form with a zero a: its kernel is the
  // additive rule's (lina-specialize), which reads no b; the caller may
  // still pass the b the text names, or leave it out.
  std::string gated =
      "lina.recurrence @w <decay = per_channel, update = dplr, beta = "
      "sigmoid, low_rank_a = zero, write = beta, key_dim = 64, value_dim = "
      "64, heads = 2, value_heads = 2, dtype = bf16, initial_state = true, "
      "final_state = true>";
  args.b = at(8);
  EXPECT_EQ(lina_check_forward_args(gated.c_str(), nullptr, &args), LINA_OK)
      << lina_last_error();
  args.b = nullptr;
  EXPECT_EQ(lina_check_forward_args(gated.c_str(), nullptr, &args), LINA_OK)
      << lina_last_error();
  // An a it does not name (zero) is still a stray pointer.
  args.a = at(9);
  EXPECT_EQ(lina_check_forward_args(gated.c_str(), nullptr, &args),
            LINA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lina_last_error())
                .find("'a' was given but the spec does not use it"),
            std::string::npos)
      << lina_last_error();
}

TEST_F(CheckArgs, BadShapeAndVarlen) {
  args.batch = 0;
  EXPECT_EQ(check(), LINA_INVALID_ARGUMENT);
  EXPECT_NE(message.find("batch must be at least 1"), std::string::npos);
  args.batch = 1;
  args.cu_seqlens = static_cast<const int64_t *>(at(9));
  EXPECT_EQ(check(), LINA_INVALID_ARGUMENT); // the spec is not varlen
  EXPECT_NE(message.find("'cu_seqlens' was given"), std::string::npos)
      << message;
}

TEST_F(CheckArgs, MessagesNameTheCApisFields) {
  // The runtime's checks speak of ForwardArgs' members; a C caller sets
  // lina_forward_args' fields and must find those names in the message.
  args.initial_state = nullptr;
  EXPECT_EQ(check(), LINA_INVALID_ARGUMENT);
  EXPECT_NE(message.find("'initial_state' is required"), std::string::npos)
      << message;
  EXPECT_EQ(message.find("initialState"), std::string::npos) << message;
  args.initial_state = static_cast<const float *>(at(6));
  args.seq_len = -1;
  EXPECT_EQ(check(), LINA_INVALID_ARGUMENT);
  EXPECT_NE(message.find("seq_len at least 0"), std::string::npos) << message;
  EXPECT_EQ(message.find("seqLen"), std::string::npos) << message;
}

TEST_F(CheckArgs, TheScheduleIsTakenIntoAccount) {
  lina_schedule schedule = {16, 64, 4, LINA_STRATEGY_MATERIALIZE};
  args.batch = 1;
  args.seq_len = 16 * 65536;
  EXPECT_EQ(lina_check_forward_args(spec.c_str(), &schedule, &args),
            LINA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lina_last_error()).find("more than 65535 chunks"),
            std::string::npos)
      << lina_last_error();
  schedule.strategy = LINA_STRATEGY_FUSED;
  EXPECT_EQ(lina_check_forward_args(spec.c_str(), &schedule, &args), LINA_OK)
      << lina_last_error();
}

TEST_F(CheckArgs, NullArgumentsAndBadSpec) {
  EXPECT_EQ(lina_check_forward_args(nullptr, nullptr, &args),
            LINA_INVALID_ARGUMENT);
  EXPECT_EQ(lina_check_forward_args(spec.c_str(), nullptr, nullptr),
            LINA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lina_last_error()).find("must not be NULL"),
            std::string::npos);
  EXPECT_EQ(lina_check_forward_args("not a spec", nullptr, &args),
            LINA_INVALID_ARGUMENT);
}

} // namespace
