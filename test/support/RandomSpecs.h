//===- RandomSpecs.h - Specs drawn from the valid spec space ----*- C++ -*-===//
//
// Part of lina's tests. The draws the random-spec tests share: the CPU
// backward's (test/unit/chunk) at tiny sizes, the GPU suites' (--random) at
// sizes the kernels take. Seeded by the caller's generator, so a failure
// names a reproducible spec.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TEST_SUPPORT_RANDOMSPECS_H
#define LINA_TEST_SUPPORT_RANDOMSPECS_H

#include "lina/Spec/Spec.h"

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace lina::randomspecs {

inline int pickFrom(std::mt19937_64 &rng, int n) {
  return static_cast<int>(rng() % n);
}

/// The form of a spec: each field drawn among the values its form allows
/// (the decay and update freely, the rest given them), so that most draws
/// are valid: gates, betas, DPLR's low-rank sources and write weight, the
/// key norm and a scale. Sizes, dtype and states are the caller's.
inline void drawForm(std::mt19937_64 &rng, Spec &s) {
  auto pick = [&](int n) { return pickFrom(rng, n); };
  s.decay = static_cast<DecayKind>(pick(4));
  s.update = static_cast<UpdateRule>(pick(3));
  bool dataGate =
      s.decay == DecayKind::Scalar || s.decay == DecayKind::PerChannel;
  s.gate = dataGate ? static_cast<GateSource>(pick(3)) : GateSource::Given;
  s.gateLowerBound = -1.0 - pick(5);
  if (s.update == UpdateRule::Delta)
    s.beta = static_cast<BetaSource>(1 + pick(3));
  else if (s.update == UpdateRule::DPLR)
    s.beta = static_cast<BetaSource>(pick(4));
  if (s.update == UpdateRule::DPLR) {
    s.lowRankA = static_cast<LowRankSource>(pick(4));
    s.lowRankB = static_cast<LowRankSource>(pick(4));
    s.write = static_cast<WriteWeight>(pick(2));
  }
  s.qkL2Norm = pick(2);
  if (pick(3) == 0)
    s.scale = 0.25 + 0.25 * pick(4);
  // A tied low-rank term on raw keys has a transition of norm up to
  // 1 + beta ||k||^2 through a; keep the recurrence bounded as lina run's
  // inputs do for the delta rule.
  if (s.update == UpdateRule::DPLR && (s.lowRankA != LowRankSource::Input ||
                                       s.lowRankB != LowRankSource::Input))
    s.qkL2Norm = true;
}

/// A spec the generated kernels take, or nullopt (draw again): the form,
/// K 64 or 128, V 32 or K, one or two heads with one or two value heads
/// each, each dtype, with and without initial and final state, packed
/// sequences a quarter of the time. Rules whose transition reads the keys
/// normalise them, as 16-bit inputs need to stay bounded.
inline std::optional<Spec> drawKernelSpec(std::mt19937_64 &rng) {
  auto pick = [&](int n) { return pickFrom(rng, n); };
  Spec s;
  s.name = "random";
  drawForm(rng, s);
  if (s.update != UpdateRule::Additive)
    s.qkL2Norm = true;
  s.keyDim = pick(2) ? 64 : 128;
  s.valueDim = pick(3) == 0 ? 32 : s.keyDim;
  s.heads = 1 + pick(2);
  s.valueHeads = s.heads * (1 + pick(2));
  s.dtype = static_cast<DType>(pick(3));
  s.initialState = pick(2);
  s.finalState = pick(2);
  s.varlen = pick(4) == 0;
  if (!validate(s).empty())
    return std::nullopt;
  return s;
}

/// A call's shape for a drawn spec: one or two sequences of 17 to 136
/// tokens, or (varlen) three packed ones, the middle one empty.
struct DrawnShape {
  int64_t batch = 1, seqLen = 0;
  std::vector<int64_t> lengths;
};
inline DrawnShape drawShape(std::mt19937_64 &rng, bool varlen) {
  auto pick = [&](int n) { return pickFrom(rng, n); };
  DrawnShape shape;
  if (varlen) {
    shape.lengths = {1 + pick(60), 0, 20 + pick(90)};
    shape.seqLen = shape.lengths[0] + shape.lengths[2];
  } else {
    shape.batch = 1 + pick(2);
    shape.seqLen = 17 + pick(120);
  }
  return shape;
}

/// "scalar.delta.gate-softplus.beta-sigmoid.l2/bf16/K64V32/H2HV4": what a
/// drawn spec is, for a case's name.
inline std::string describeSpec(const Spec &s) {
  std::string name = std::string(toString(s.decay)) + "." + toString(s.update) +
                     ".gate-" + toString(s.gate) + ".beta-" + toString(s.beta);
  if (s.update == UpdateRule::DPLR)
    name += std::string(".a-") + toString(s.lowRankA) + ".b-" +
            toString(s.lowRankB) + ".w-" + toString(s.write);
  if (s.qkL2Norm)
    name += ".l2";
  return name + "/" + toString(s.dtype) + "/K" + std::to_string(s.keyDim) +
         "V" + std::to_string(s.valueDim) + "/H" + std::to_string(s.heads) +
         "HV" + std::to_string(s.valueHeads);
}

} // namespace lina::randomspecs

#endif // LINA_TEST_SUPPORT_RANDOMSPECS_H
