//===- SpecTest.cpp - lina::Spec validation and names ------------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

using namespace lina;

namespace {

TEST(Presets, AllValidAndNamed) {
  ASSERT_EQ(presets().size(), 8u);
  for (const Preset &p : presets()) {
    EXPECT_TRUE(validate(p.spec).empty()) << p.name;
    EXPECT_EQ(p.spec.name, p.name);
    EXPECT_TRUE(findPreset(p.name).has_value());
  }
  EXPECT_FALSE(findPreset("softmax").has_value());
}

TEST(Presets, FlaNamesFindTheirPreset) {
  // fla.ops.<name> -> the preset with that recurrence; the spec keeps the
  // preset's own name, so both spellings share cached kernels.
  const std::pair<const char *, const char *> aliases[] = {
      {"simple_gla", "mamba2"},       {"gated_delta_rule", "gdn"},
      {"delta_rule", "deltanet"},     {"retention", "retnet"},
      {"dplr_delta_rule", "rwkv7"},   {"gla", "gla"},
      {"kda", "kda"},                 {"linear_attn", "linear_attn"},
      {"rwkv7", "rwkv7"}};
  for (auto [alias, name] : aliases) {
    std::optional<Preset> preset = findPreset(alias);
    ASSERT_TRUE(preset.has_value()) << alias;
    EXPECT_STREQ(preset->name, name);
    EXPECT_EQ(preset->spec.name, name);
  }
  // simple_gla is fla's scalar-gate additive rule.
  Spec simpleGla = findPreset("simple_gla")->spec;
  EXPECT_EQ(simpleGla.decay, DecayKind::Scalar);
  EXPECT_EQ(simpleGla.update, UpdateRule::Additive);
  // No alias is another preset's name, and none is given twice.
  std::set<std::string> seen;
  for (const Preset &p : presets())
    seen.insert(p.name);
  for (const Preset &p : presets())
    for (const char *alias : p.aliases)
      EXPECT_TRUE(seen.insert(alias).second) << alias;
}

/// The first message validate() gives, or "".
std::string firstError(const Spec &s) {
  std::vector<std::string> e = validate(s);
  return e.empty() ? "" : e.front();
}

TEST(Validate, EveryInconsistencyNamesItsField) {
  Spec s = findPreset("gdn")->spec;
  Spec grouped = s;
  grouped.heads = 4;
  grouped.valueHeads = 6;
  EXPECT_NE(firstError(grouped).find("value_heads (6) must be a multiple of "
                                     "heads (4)"),
            std::string::npos);
  Spec noBeta = s;
  noBeta.beta = BetaSource::None;
  EXPECT_NE(firstError(noBeta).find("update = delta needs beta"),
            std::string::npos);
  Spec zeroDim = s;
  zeroDim.valueDim = 0;
  EXPECT_NE(firstError(zeroDim).find("value_dim must be positive"),
            std::string::npos);
  Spec gateNoDecay = findPreset("deltanet")->spec;
  gateNoDecay.gate = GateSource::Softplus;
  EXPECT_NE(firstError(gateNoDecay).find("gate = softplus"), std::string::npos);
  Spec badBound = findPreset("kda")->spec;
  badBound.gate = GateSource::LowerBound;
  badBound.gateLowerBound = NAN;
  EXPECT_NE(firstError(badBound).find("gate_lower_bound"), std::string::npos);
  Spec badScale = s;
  badScale.scale = INFINITY;
  EXPECT_NE(firstError(badScale).find("scale must be finite"),
            std::string::npos);
  Spec strayWrite = s;
  strayWrite.write = WriteWeight::Beta;
  EXPECT_EQ(firstError(strayWrite),
            "write describes the dplr and additive updates; remove it (update "
            "is delta, whose write weight is beta)");
  Spec strayLowRank = findPreset("gla")->spec;
  strayLowRank.lowRankA = LowRankSource::Zero;
  EXPECT_EQ(firstError(strayLowRank),
            "low_rank_a and low_rank_b describe the dplr update; remove them "
            "(update is additive)");
}

// The additive rule's weighted write w_t k_t v_t^T takes beta as w_t: with
// write = beta, beta is required and used; without, it is stray.
TEST(Validate, TheAdditiveRulesWriteWeightIsBeta) {
  Spec weighted = findPreset("gla")->spec;
  weighted.write = WriteWeight::Beta;
  EXPECT_EQ(firstError(weighted),
            "low_rank_a/low_rank_b = beta_key and write = beta need beta: set "
            "beta = given, sigmoid or two_sigmoid");
  weighted.beta = BetaSource::Sigmoid;
  EXPECT_TRUE(validate(weighted).empty()) << firstError(weighted);
  Spec stray = findPreset("gla")->spec;
  stray.beta = BetaSource::Given;
  EXPECT_EQ(firstError(stray),
            "beta is only used by update = delta, write = beta or a dplr "
            "beta_key vector; remove it (update is additive)");
}

TEST(Validate, DefaultScaleIsInverseSqrtKeyDim) {
  Spec s;
  s.keyDim = 64;
  EXPECT_DOUBLE_EQ(s.effectiveScale(), 0.125);
  s.scale = 2.0;
  EXPECT_DOUBLE_EQ(s.effectiveScale(), 2.0);
}

TEST(Names, RoundTrip) {
  for (auto d : {DecayKind::None, DecayKind::FixedPerHead, DecayKind::Scalar,
                 DecayKind::PerChannel})
    EXPECT_EQ(parseDecayKind(toString(d)), d);
  for (auto u : {UpdateRule::Additive, UpdateRule::Delta, UpdateRule::DPLR})
    EXPECT_EQ(parseUpdateRule(toString(u)), u);
  for (auto t : {DType::BF16, DType::F16, DType::F32})
    EXPECT_EQ(parseDType(toString(t)), t);
  for (auto l : {LowRankSource::Input, LowRankSource::Zero,
                 LowRankSource::BetaKey, LowRankSource::NegDecayedKey})
    EXPECT_EQ(parseLowRankSource(toString(l)), l);
  EXPECT_FALSE(parseDType("f64").has_value());
  EXPECT_FALSE(parseBetaSource("").has_value());
}

} // namespace
