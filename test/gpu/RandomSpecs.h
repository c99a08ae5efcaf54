//===- RandomSpecs.h - Specs drawn from the valid spec space ----*- C++ -*-===//
//
// Part of lina's GPU suites. --random draws specs as the CPU backward test
// draws them (every decay, update rule, gate and beta source, DPLR's
// low-rank sources and write weight, scale, norms), at sizes the generated
// kernels take: K 64 or 128, V 32 or K, one or two heads with one or two
// value heads each, each dtype, with and without initial and final state,
// packed sequences a quarter of the time. The draws are seeded, so a
// failure names a reproducible spec.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TEST_GPU_RANDOMSPECS_H
#define LINA_TEST_GPU_RANDOMSPECS_H

#include "lina/Spec/Spec.h"

#include <optional>
#include <random>
#include <string>

namespace lina::gpusuite {

/// One draw: a spec lina::validate accepts, or nullopt (draw again).
inline std::optional<Spec> drawSpec(std::mt19937_64 &rng) {
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  Spec s;
  s.name = "random";
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
  // Rules whose transition reads the keys grow without a norm (as lina
  // run's inputs keep the delta rule bounded).
  s.qkL2Norm = s.update != UpdateRule::Additive || pick(2);
  if (pick(3) == 0)
    s.scale = 0.25 + 0.25 * pick(4);
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

} // namespace lina::gpusuite

#endif // LINA_TEST_GPU_RANDOMSPECS_H
