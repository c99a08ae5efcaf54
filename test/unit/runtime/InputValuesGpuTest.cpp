//===- InputValuesGpuTest.cpp - The opt-in value checks on a GPU ---------===//
//
// Part of lina. checkInputValues copies cu_seqlens and the gates from the
// device; these tests put bad values there and expect the rejection. Skipped
// without a driver or a GPU (the host halves are in ForwardChecksTest).
//
//===----------------------------------------------------------------------===//
#include "GpuFixture.h"

#include "lina/Runtime/Device.h"
#include "lina/Runtime/Driver.h"
#include "lina/Runtime/ForwardChecks.h"
#include "lina/Runtime/Memory.h"
#include "lina/Spec/Presets.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <cmath>
#include <cstdint>
#include <vector>

using namespace lina;
using namespace lina::cuda;
using ::testing::HasSubstr;

namespace {

class InputValuesGpuTest : public test::OnGpu {
protected:
  template <typename T> DeviceBuffer upload(const std::vector<T> &host) {
    Expected<DeviceBuffer> b =
        DeviceBuffer::allocate(0, host.size() * sizeof(T));
    EXPECT_TRUE(b.ok()) << b.message();
    EXPECT_TRUE(b->copyFromHost(host.data(), host.size() * sizeof(T)).ok());
    return std::move(*b);
  }
};

template <typename T> const T *devicePtr(const DeviceBuffer &b) {
  return reinterpret_cast<const T *>(static_cast<uintptr_t>(b.pointer()));
}

TEST_F(InputValuesGpuTest, BadCuSeqlensAndNonFiniteGatesAreRejected) {
  KernelPlan plan;
  plan.spec = findPreset("gdn")->spec;
  plan.spec.keyDim = plan.spec.valueDim = 16;
  plan.spec.heads = plan.spec.valueHeads = 1;
  plan.spec.varlen = true;
  plan.chunkSize = 16;
  plan.tileV = 16;
  const int64_t T = 10;
  std::vector<float> gates(T, -0.5f);
  DeviceBuffer g = upload(gates), beta = upload(gates);
  DeviceBuffer cuGood = upload(std::vector<int64_t>{0, 4, 10});
  DeviceBuffer cuBad = upload(std::vector<int64_t>{0, 6, 4});
  gates[7] = std::nanf("");
  DeviceBuffer gNan = upload(gates);

  ForwardArgs a;
  a.batch = 1;
  a.seqLen = T;
  a.numSequences = 2;
  a.g = devicePtr<float>(g);
  a.beta = devicePtr<float>(beta);
  a.cuSeqlens = devicePtr<int64_t>(cuGood);
  Status s = checkInputValues(plan, a, 0);
  EXPECT_TRUE(s.ok()) << s.message();

  a.cuSeqlens = devicePtr<int64_t>(cuBad);
  EXPECT_THAT(checkInputValues(plan, a, 0).message(),
              HasSubstr("'cuSeqlens' must be non-decreasing"));
  a.cuSeqlens = devicePtr<int64_t>(cuGood);
  a.beta = devicePtr<float>(gNan);
  EXPECT_THAT(checkInputValues(plan, a, 0).message(),
              HasSubstr("'beta' holds NaN at element 7"));
}

} // namespace
