//===- CacheSpecNamesTest.cpp - Names for tuning results without one ----===//
//
// Part of lina. An older lina's tuning result is named after the preset
// whose spec it is, at whatever dims, heads and dtype it was tuned, and
// whether it is the spec itself, its decode key or its tuning family.
//
//===----------------------------------------------------------------------===//
#include "CacheSpecNames.h"

#include "lina/Autotune/CacheKeys.h"
#include "lina/Autotune/TunedLookup.h"
#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

using namespace lina;
using namespace lina::cli;

namespace {

TEST(CacheSpecNames, EveryPresetAtOtherDims) {
  for (const Preset &preset : presets()) {
    Spec spec = preset.spec;
    spec.keyDim = 64;
    spec.valueDim = 32;
    spec.heads = 4;
    spec.valueHeads = 8;
    spec.dtype = DType::F16;
    std::string text = cache::canonicalSpecText(spec);
    EXPECT_EQ(presetNameForSpecText(text), preset.name) << text;
    EXPECT_EQ(presetNameForSpecText(
                  cache::canonicalSpecText(tuningFamily(spec))),
              preset.name);
    Spec stateless = spec;
    stateless.initialState = stateless.finalState = false;
    EXPECT_EQ(presetNameForSpecText("decode " +
                                    cache::canonicalSpecText(stateless)),
              preset.name);
  }
}

TEST(CacheSpecNames, NoneForOtherSpecs) {
  Spec spec = findPreset("gdn")->spec;
  spec.update = UpdateRule::Additive;
  spec.decay = DecayKind::None;
  spec.qkL2Norm = true;
  spec.beta = BetaSource::Given;
  EXPECT_EQ(presetNameForSpecText(cache::canonicalSpecText(spec)), "");
  EXPECT_EQ(presetNameForSpecText(""), "");
  EXPECT_EQ(presetNameForSpecText("decay=scalar update=delta"), "");
}

} // namespace
