//===- DecodeServing.h - A decode call in the engines' layouts -*- C++ -*-===//
//
// Part of lina. The serving layouts of a decode call (docs/decode.md,
// "Serving layouts") in float64: packed sequences of their own lengths, per
// sequence or per token slots, intermediate states, disable_state_update.
// Each sequence is a [1, T] problem of its own, run through
// runDecodeReference from its starting state: the sequences of one call
// write distinct slots and read none another writes, so one after the
// other is what the parallel kernel must produce. The CPU emulation and
// the GPU suite both compare against it.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_REFERENCE_DECODESERVING_H
#define LINA_REFERENCE_DECODESERVING_H

#include "lina/Reference/Problem.h"

#include <cstdint>
#include <random>
#include <vector>

namespace lina::reference {

/// One packed decode call. Pool and intermediate buffer are [K, V] per
/// head here; a [V, K] call transposes them (transposeHeads).
struct ServingCall {
  Spec spec;
  std::vector<int64_t> lengths; ///< tokens of each sequence (0: padding)
  /// Sequence n's tokens, [1, lengths[n]] (empty Problem for 0), no
  /// initial state; per-head inputs (gateALog, gateDtBias, a fixed decay)
  /// are the same in all of them.
  std::vector<Problem> sequences;
  std::vector<double> pool; ///< [numSlots, HV, K, V]
  int64_t numSlots = 0;
  /// [N], or with perToken [N, rowWidth].
  std::vector<int32_t> slots;
  bool perToken = false;
  int64_t rowWidth = 0;
  std::vector<int32_t> accepted; ///< [N] with perToken, or empty
  int64_t numIntermediate = 0, steps = 0;
  std::vector<int32_t> intermediateRows; ///< [N], or empty
  bool disableStateUpdate = false;
};

struct ServingResult {
  std::vector<double> o;            ///< [1, tokens, HV, V]
  std::vector<double> pool;         ///< after the call
  std::vector<bool> writtenSlots;   ///< slots the call may change
  std::vector<double> intermediate; ///< [rows, steps, HV, K, V]
  std::vector<bool> writtenSteps;   ///< [rows * steps]
};

/// Draws the sequences (randomProblem per sequence, sharing the per-head
/// inputs of the first) and a N(0, 1) pool rounded to float; slots and the
/// other fields are the caller's.
void drawServingCall(ServingCall &call, std::mt19937_64 &rng);

/// The call's results (docs/decode.md): requires consistent fields (the
/// sequences as drawn, slots [N] or [N, rowWidth]). A per-token sequence
/// starts from its row's slot accepted[n] - 1 (a count outside
/// [1, rowWidth]: zero) and keeps the state after token t < rowWidth in
/// its row's slot t.
ServingResult runServingReference(const ServingCall &call);

/// Offsets [N + 1] of the packed tokens.
std::vector<int64_t> servingOffsets(const ServingCall &call);

/// Each [HV][K][V] head of `x` (a whole number of heads) as [HV][V][K], or
/// back with `back`.
std::vector<double> transposeHeads(const std::vector<double> &x, int64_t K,
                                   int64_t V, bool back);

} // namespace lina::reference

#endif // LINA_REFERENCE_DECODESERVING_H
