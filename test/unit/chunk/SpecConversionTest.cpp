//===- SpecConversionTest.cpp - #lina.spec <-> lina::Spec --------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Dialect/Lina/IR/SpecConversion.h"
#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

using namespace lina;

namespace {

bool sameSpec(const Spec &a, const Spec &b) {
  return a.decay == b.decay && a.update == b.update && a.gate == b.gate &&
         a.gateLowerBound == b.gateLowerBound && a.beta == b.beta &&
         a.lowRankA == b.lowRankA && a.lowRankB == b.lowRankB &&
         a.write == b.write && a.qkL2Norm == b.qkL2Norm && a.scale == b.scale &&
         a.keyDim == b.keyDim && a.valueDim == b.valueDim &&
         a.heads == b.heads && a.valueHeads == b.valueHeads &&
         a.dtype == b.dtype && a.initialState == b.initialState &&
         a.finalState == b.finalState && a.varlen == b.varlen;
}

TEST(SpecConversion, EveryFieldSurvivesTheAttribute) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<LinaDialect>();
  Spec everything = findPreset("rwkv7")->spec;
  everything.gate = GateSource::LowerBound;
  everything.gateLowerBound = -3.5;
  everything.beta = BetaSource::TwoSigmoid;
  everything.lowRankA = LowRankSource::NegDecayedKey;
  everything.lowRankB = LowRankSource::BetaKey;
  everything.write = WriteWeight::Beta;
  everything.qkL2Norm = true;
  everything.scale = 0.5;
  everything.dtype = DType::F16;
  everything.varlen = true;
  std::vector<Spec> specs = {everything};
  for (const Preset &p : presets())
    specs.push_back(p.spec);
  for (const Spec &s : specs)
    EXPECT_TRUE(sameSpec(toSpec(toSpecAttr(&ctx, s)), s)) << s.name;
}

TEST(SpecConversion, PrintedModuleNamesTheSpec) {
  Spec s = findPreset("gla")->spec;
  std::string text = printSpecModule(s);
  EXPECT_NE(text.find("lina.recurrence @gla <decay = per_channel"),
            std::string::npos)
      << text;
}

} // namespace
