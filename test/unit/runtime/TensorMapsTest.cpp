//===- TensorMapsTest.cpp - The wgmma scan's TMA descriptors -------------===//
//
// Part of lina. What TMA cannot read is refused before the driver is asked,
// naming the tensor and the fix: an address off 16 bytes, and more tokens
// than the kernel's 32-bit coordinates reach. (Encoding itself needs the
// driver; the GPU suite's wgmma cases run it.)
//
//===----------------------------------------------------------------------===//
#include "TensorMaps.h"

#include "gtest/gtest.h"

using namespace lina;

namespace {

KernelPlan wgmmaPlan() {
  KernelPlan plan;
  plan.spec.keyDim = plan.spec.valueDim = 128;
  plan.spec.heads = plan.spec.valueHeads = 4;
  plan.needsSm90a = true;
  return plan;
}

TEST(TensorMaps, RefuseUnalignedTensorsByName) {
  alignas(16) static unsigned char bytes[64];
  ForwardArgs args;
  args.batch = 1;
  args.seqLen = 64;
  // q is checked first, before the driver is asked for anything.
  args.q = bytes + 8;
  args.k = bytes;
  args.v = bytes;
  Expected<WgmmaMaps> maps = wgmmaMaps(wgmmaPlan(), args);
  ASSERT_FALSE(maps.ok());
  EXPECT_NE(maps.message().find("q must start at a 16-byte aligned address"),
            std::string::npos)
      << maps.message();
  EXPECT_NE(maps.message().find("--mma warp"), std::string::npos);
}

TEST(TensorMaps, RefuseMoreTokensThanTheCoordinatesReach) {
  ForwardArgs args;
  args.batch = 4;
  args.seqLen = int64_t(1) << 30;
  Expected<WgmmaMaps> maps = wgmmaMaps(wgmmaPlan(), args);
  ASSERT_FALSE(maps.ok());
  EXPECT_NE(maps.message().find("32-bit coordinates"), std::string::npos)
      << maps.message();
}

} // namespace
