//===- SegmentsTest.cpp - Sequences run as segments -----------------------===//
//
// Part of lina. The additive rules with a decay can run a sequence as P
// segments at once (Segments.cuh): the plan then carries two more kernels,
// whose constants must name the same workspace records the scan reads (the
// state's product operand X and the chunk's decay factors). The rules that
// cannot are refused with the reason. The GPU suite's "+seg" cases check
// the results against the float64 reference.
//
//===----------------------------------------------------------------------===//
#include "KernelText.h"

#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

#include <regex>

using namespace lina;
using namespace lina::test;

namespace {

Spec preset(const char *name, int64_t dim) {
  Spec spec = findPreset(name)->spec;
  spec.keyDim = spec.valueDim = dim;
  return spec;
}

ScheduleOptions segmented(const Spec &spec, int64_t segments,
                          int64_t tileV) {
  ScheduleOptions s = defaultSchedule(spec);
  s.segments = segments;
  s.tileV = tileV;
  return s;
}

/// The record offset the scan fetches the shared-memory buffer `smem` from.
std::string recordOffsetOf(const std::string &scan, const std::string &smem) {
  std::smatch m;
  std::regex fetch("\\(smem \\+ " + smem +
                   " \\+ into\\), \\((?:bf16|float) \\*\\)\\(record \\+ "
                   "([0-9]+)\\)");
  EXPECT_TRUE(std::regex_search(scan, m, fetch)) << smem;
  return m.size() > 1 ? m[1].str() : "";
}

TEST(Segments, CarryReadsTheRecordsTheScanReads) {
  for (const char *name : {"retnet", "mamba2", "gla"})
    for (int64_t dim : {64, 128})
      for (int64_t tileV : {int64_t(32), dim}) {
        SCOPED_TRACE(std::string(name) + " d" + std::to_string(dim) + " tv" +
                     std::to_string(tileV));
        Spec spec = preset(name, dim);
        KernelPlan p = plan(spec, segmented(spec, 4, tileV));
        EXPECT_EQ(p.segments, 4);
        EXPECT_EQ(p.combineKernel, "lina_segment_combine");
        EXPECT_EQ(p.carryKernel, "lina_segment_carry");
        int64_t gates = spec.decay == DecayKind::PerChannel ? dim : 1;
        EXPECT_EQ(p.segmentGateColumns, gates);
        EXPECT_GT(p.carrySharedBytes, 0u);
        std::string scan = scanKernel(p);
        std::smatch decay, product;
        ASSERT_TRUE(std::regex_search(
            scan, decay, std::regex("S\\.decay<[0-9]+, true>\\(\\(smem \\+ "
                                    "([0-9]+) \\+ ring\\)\\)")));
        ASSERT_TRUE(std::regex_search(
            scan, product,
            std::regex("S\\.product[a-z_]*<[^>]*>\\(global_rows<bf16>\\{[^}]*"
                       "\\}, \\(\\(bf16 \\*\\)\\(smem \\+ ([0-9]+) \\+ "
                       "ring\\)\\)")));
        std::string factors = recordOffsetOf(scan, decay[1].str());
        std::string query = recordOffsetOf(scan, product[1].str());
        std::string carry = kernelText(p, p.carryKernel);
        std::string shape = std::to_string(p.chunkSize) + ", " +
                            std::to_string(dim) + ", " + std::to_string(dim) +
                            ", " + std::to_string(gates) + ", " +
                            std::to_string(spec.valueHeads) + ", " +
                            std::to_string(p.chunkDataFloats);
        std::string carryArgs =
            shape + ", " + query + ", " + factors + ", lina::bf16>";
        EXPECT_NE(carry.find("segment_carry<" + carryArgs), std::string::npos)
            << "expected segment_carry<" << carryArgs << " in\n"
            << carry;
        std::string combineArgs = shape + ", " + factors + ">";
        EXPECT_NE(kernelText(p, p.combineKernel)
                      .find("segment_combine<" + combineArgs),
                  std::string::npos)
            << combineArgs;
      }
}

// Without pieces the kernels compile no piece arithmetic (LINA_SEGMENTS
// unset: sequence_bounds' division cost gdn's prepare kernel 12 registers,
// a CTA an SM, in every plan).
TEST(Segments, OnePieceAddsNoKernels) {
  Spec spec = preset("mamba2", 128);
  KernelPlan p = plan(spec, segmented(spec, 1, 128));
  EXPECT_EQ(p.segments, 1);
  EXPECT_TRUE(p.carryKernel.empty());
  EXPECT_EQ(p.source.find("lina_segment_carry"), std::string::npos);
  EXPECT_EQ(p.source.find("#define LINA_SEGMENTS 1"), std::string::npos);
  KernelPlan pieces = plan(spec, segmented(spec, 4, 128));
  EXPECT_NE(pieces.source.find("#define LINA_SEGMENTS 1"), std::string::npos);
}

TEST(Segments, RulesThatCannotAreRefusedWithTheReason) {
  for (const char *name : {"gdn", "kda", "deltanet", "rwkv7", "linear_attn"}) {
    SCOPED_TRACE(name);
    Spec spec = preset(name, 128);
    Expected<KernelPlan> p = planChunkKernel(spec, segmented(spec, 2, 32));
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), StatusCode::InvalidArgument);
    EXPECT_NE(p.message().find("segments: "), std::string::npos) << p.message();
  }
  Spec f32 = preset("mamba2", 128);
  f32.dtype = DType::F32;
  Expected<KernelPlan> p = planChunkKernel(f32, segmented(f32, 2, 32));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.message().find("bf16 or f16"), std::string::npos) << p.message();

  Spec spec = preset("mamba2", 128);
  ScheduleOptions fused = segmented(spec, 2, 32);
  fused.strategy = Strategy::FusedScan;
  p = planChunkKernel(spec, fused);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.message().find("segments need the split strategy"),
            std::string::npos)
      << p.message();
  Spec wide = preset("gla", 128);
  wide.keyDim = 512;
  p = planChunkKernel(wide, segmented(wide, 2, 32));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.message().find("at most 256 (got 512 and 128)"),
            std::string::npos)
      << p.message();
  p = planChunkKernel(spec, segmented(spec, 17, 32));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.message().find("segments must be 1 to 16, got 17"),
            std::string::npos)
      << p.message();
}

} // namespace
