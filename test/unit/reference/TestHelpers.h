//===- TestHelpers.h - Shared helpers of the reference tests ----*- C++ -*-===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TEST_UNIT_REFERENCE_TESTHELPERS_H
#define LINA_TEST_UNIT_REFERENCE_TESTHELPERS_H

#include "lina/Reference/Reference.h"
#include "lina/Spec/Presets.h"

#include "gtest/gtest.h"

#include <cmath>
#include <string>
#include <vector>

namespace lina::reference::testing {

/// A spec with one head, the given dimensions and scale 1, so hand-worked
/// numbers stay small. Delta specs get beta = given.
inline Spec tinySpec(DecayKind decay, UpdateRule update, int64_t keyDim,
                     int64_t valueDim) {
  Spec s;
  s.name = "tiny";
  s.decay = decay;
  s.update = update;
  s.beta = update == UpdateRule::Delta ? BetaSource::Given : BetaSource::None;
  s.scale = 1.0;
  s.keyDim = keyDim;
  s.valueDim = valueDim;
  s.heads = 1;
  s.valueHeads = 1;
  return s;
}

/// The preset `name` shrunk to the dimensions the cross-checks use: K = 8,
/// V = 6, two q/k heads shared by four value heads.
inline Spec smallPreset(const std::string &name) {
  std::optional<Preset> preset = findPreset(name);
  EXPECT_TRUE(preset.has_value()) << name;
  Spec s = preset ? preset->spec : Spec();
  s.keyDim = 8;
  s.valueDim = 6;
  s.heads = 2;
  s.valueHeads = 4;
  return s;
}

/// Whether every value is finite.
inline bool allFinite(const std::vector<double> &values) {
  for (double x : values)
    if (!std::isfinite(x))
      return false;
  return true;
}

/// Euclidean norm, to make sure a comparison is not between two zeros.
inline double norm(const std::vector<double> &values) {
  double sum = 0;
  for (double x : values)
    sum += x * x;
  return std::sqrt(sum);
}

/// Expects `x` to equal `expected` element by element within `tolerance`.
inline void expectValues(const std::vector<double> &x,
                         const std::vector<double> &expected,
                         double tolerance = 1e-14) {
  ASSERT_EQ(x.size(), expected.size());
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_NEAR(x[i], expected[i], tolerance) << "at index " << i;
}

} // namespace lina::reference::testing

#endif // LINA_TEST_UNIT_REFERENCE_TESTHELPERS_H
