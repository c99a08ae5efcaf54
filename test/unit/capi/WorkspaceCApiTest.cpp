//===- WorkspaceCApiTest.cpp - Lent workspaces through the C API --------===//
//
// Part of lina. Through liblina.so: the size queries and the
// *_with_workspace entry points refuse NULLs by name on any machine; with
// a GPU, a kernel's size query answers per shape and a workspace one byte
// short is refused, naming the size, before anything launches (the call's
// tensors are made-up aligned addresses: a refused call never reads them).
// test/python/test_cuda_graph_gpu.py runs the kernels in lent workspaces.
//
//===----------------------------------------------------------------------===//
#include "lina/lina_c.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace {

std::string presetText(const char *preset) {
  char *text = nullptr;
  EXPECT_EQ(lina_preset_spec(preset, 64, 64, 2, 2, "bf16", &text), LINA_OK)
      << lina_last_error();
  std::string spec(text ? text : "");
  lina_free_string(text);
  return spec;
}

bool errorHas(const std::string &text) {
  return std::string(lina_last_error()).find(text) != std::string::npos;
}

TEST(WorkspaceCApi, NullsAreArgumentErrors) {
  size_t bytes = 7;
  EXPECT_EQ(lina_kernel_workspace_size(nullptr, 1, 16, 0, &bytes),
            LINA_INVALID_ARGUMENT);
  EXPECT_TRUE(errorHas("lina_kernel_workspace_size: kernel and bytes must "
                       "not be NULL"))
      << lina_last_error();
  EXPECT_EQ(bytes, 7u); // untouched on error
  lina_forward_args args = {};
  EXPECT_EQ(lina_kernel_forward_with_workspace(nullptr, &args, nullptr, 0),
            LINA_INVALID_ARGUMENT);
  EXPECT_TRUE(errorHas("lina_kernel_forward_with_workspace: kernel and args "
                       "must not be NULL"))
      << lina_last_error();
  EXPECT_EQ(lina_backward_workspace_size(nullptr, 1, 16, 0, &bytes),
            LINA_INVALID_ARGUMENT);
  EXPECT_TRUE(errorHas("lina_backward_workspace_size: kernel and bytes must "
                       "not be NULL"))
      << lina_last_error();
  lina_backward_args backward = {};
  EXPECT_EQ(
      lina_backward_run_with_workspace(nullptr, &backward, nullptr, 0),
      LINA_INVALID_ARGUMENT);
  EXPECT_TRUE(errorHas("lina_backward_run_with_workspace: kernel and args "
                       "must not be NULL"))
      << lina_last_error();
}

/// A made-up device address, 256-byte aligned; never dereferenced.
void *fake(int slot) {
  return reinterpret_cast<void *>((uint64_t(slot + 1) << 36));
}

/// A gdn call of B x T with every pointer the preset's spec needs (it has
/// an initial and a final state).
lina_forward_args gdnArgs(int64_t batch, int64_t seqLen) {
  lina_forward_args a = {};
  a.q = fake(0);
  a.k = fake(1);
  a.v = fake(2);
  a.g = static_cast<const float *>(fake(3));
  a.beta = static_cast<const float *>(fake(4));
  a.o = fake(5);
  a.initial_state = static_cast<const float *>(fake(14));
  a.final_state = static_cast<float *>(fake(15));
  a.batch = batch;
  a.seq_len = seqLen;
  return a;
}

lina_schedule scheduleOf(lina_strategy strategy) {
  lina_schedule schedule = {};
  schedule.strategy = strategy;
  schedule.mma = LINA_MMA_WARP;
  return schedule;
}

/// A kernel of `strategy` for gdn (d64, 2 heads), or nullptr where no GPU
/// is present.
lina_kernel *gpuKernel(lina_strategy strategy) {
  std::string spec = presetText("gdn");
  lina_schedule schedule = scheduleOf(strategy);
  lina_kernel *kernel = nullptr;
  lina_status status =
      lina_kernel_create(spec.c_str(), &schedule, 0, &kernel);
  if (status == LINA_NO_DRIVER)
    return nullptr;
  EXPECT_EQ(status, LINA_OK) << lina_last_error();
  return kernel;
}

TEST(WorkspaceCApi, SizeQueryAndRefusalOnAGpu) {
  // The call below passes every check but the workspace's (made sure of
  // without a GPU), so its refusal can only be the workspace.
  lina_schedule materialize = scheduleOf(LINA_STRATEGY_MATERIALIZE);
  lina_forward_args valid = gdnArgs(2, 1024);
  ASSERT_EQ(lina_check_forward_args(presetText("gdn").c_str(), &materialize,
                                    &valid),
            LINA_OK)
      << lina_last_error();
  lina_kernel *kernel = gpuKernel(LINA_STRATEGY_MATERIALIZE);
  if (!kernel)
    GTEST_SKIP() << "no GPU: a kernel cannot be created";
  size_t small = 0, large = 0;
  ASSERT_EQ(lina_kernel_workspace_size(kernel, 2, 256, 0, &small), LINA_OK)
      << lina_last_error();
  ASSERT_EQ(lina_kernel_workspace_size(kernel, 2, 1024, 0, &large), LINA_OK);
  EXPECT_GT(small, 0u);
  EXPECT_GT(large, small);
  EXPECT_EQ(lina_kernel_workspace_size(kernel, 0, 256, 0, &small),
            LINA_INVALID_ARGUMENT);
  EXPECT_TRUE(errorHas("lina_kernel_workspace_size: batch must be at least 1 "
                       "and seq_len at least 0, got 0 and 256"))
      << lina_last_error();

  ASSERT_EQ(lina_kernel_workspace_size(kernel, 2, 1024, 0, &large), LINA_OK);
  lina_forward_args args = gdnArgs(2, 1024);
  EXPECT_EQ(lina_kernel_forward_with_workspace(kernel, &args, fake(6),
                                               large - 1),
            LINA_INVALID_ARGUMENT);
  EXPECT_TRUE(errorHas("this call needs a workspace of " +
                       std::to_string(large) + " bytes, got " +
                       std::to_string(large - 1)))
      << lina_last_error();
  EXPECT_TRUE(errorHas("(lina_kernel_workspace_size says how many)"));
  EXPECT_EQ(lina_kernel_forward_with_workspace(kernel, &args, nullptr, 0),
            LINA_INVALID_ARGUMENT);
  EXPECT_TRUE(errorHas("none was given")) << lina_last_error();
  // o's memory as the workspace: the kernels would write both.
  EXPECT_EQ(lina_kernel_forward_with_workspace(kernel, &args, args.o, large),
            LINA_INVALID_ARGUMENT);
  EXPECT_TRUE(errorHas("overlaps 'o'")) << lina_last_error();
  // The call's own checks come first: a missing q is named as always.
  args.q = nullptr;
  EXPECT_EQ(lina_kernel_forward_with_workspace(kernel, &args, fake(6), large),
            LINA_INVALID_ARGUMENT);
  EXPECT_FALSE(errorHas("workspace")) << lina_last_error();
  lina_kernel_destroy(kernel);

  lina_kernel *fused = gpuKernel(LINA_STRATEGY_FUSED);
  ASSERT_NE(fused, nullptr);
  size_t none = 1;
  ASSERT_EQ(lina_kernel_workspace_size(fused, 2, 1024, 0, &none), LINA_OK);
  EXPECT_EQ(none, 0u);
  lina_kernel_destroy(fused);
}

TEST(WorkspaceCApi, BackwardSizeQueryAndRefusalOnAGpu) {
  std::string spec = presetText("gdn");
  lina_backward_kernel *kernel = nullptr;
  lina_status status = lina_backward_create(spec.c_str(), nullptr, 0, &kernel);
  if (status == LINA_NO_DRIVER)
    GTEST_SKIP() << "no GPU: a kernel cannot be created";
  ASSERT_EQ(status, LINA_OK) << lina_last_error();
  size_t bytes = 0;
  ASSERT_EQ(lina_backward_workspace_size(kernel, 2, 1024, 0, &bytes), LINA_OK)
      << lina_last_error();
  EXPECT_GT(bytes, 0u);
  lina_backward_args args = {};
  args.forward = gdnArgs(2, 1024);
  args.forward.o = nullptr;
  args.forward.final_state = nullptr;
  args.d_o = fake(7);
  args.d_initial_state = static_cast<float *>(fake(16));
  args.dq = static_cast<float *>(fake(8));
  args.dk = static_cast<float *>(fake(9));
  args.dv = static_cast<float *>(fake(10));
  args.dg = static_cast<float *>(fake(11));
  args.dbeta = static_cast<float *>(fake(12));
  EXPECT_EQ(lina_backward_run_with_workspace(kernel, &args, fake(13),
                                             bytes / 2),
            LINA_INVALID_ARGUMENT);
  EXPECT_TRUE(errorHas("this call needs a workspace of " +
                       std::to_string(bytes) + " bytes"))
      << lina_last_error();
  EXPECT_TRUE(errorHas("(lina_backward_workspace_size says how many)"));
  lina_backward_destroy(kernel);
}

} // namespace
