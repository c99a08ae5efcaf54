//===- DecodeReference.h - The decode call's semantics in float64 -*- C++
//-*-===//
//
// Part of lina. What one decode call with a state pool must do
// (docs/decode.md), written on top of the recurrent oracle one token at a
// time: where each sequence's state comes from (its slot, or zero), what the
// outputs are, and which slots hold which state afterwards. The GPU suite
// and the CPU emulation of the decode kernel are checked against this.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_REFERENCE_DECODEREFERENCE_H
#define LINA_REFERENCE_DECODEREFERENCE_H

#include "lina/Reference/Problem.h"

#include <cstdint>
#include <string>
#include <vector>

namespace lina::reference {

/// One decode call. `step` holds the new tokens, [B, T] (its initialState is
/// not used; spec.varlen must be false). The pool is [numSlots, HV, K, V].
struct DecodeProblem {
  Problem step;
  std::vector<double> pool;
  int64_t numSlots = 0;
  /// [B] (a slot per sequence) or, with perToken, [B, T].
  std::vector<int32_t> slots;
  bool perToken = false;
  /// [B] with perToken, or empty (one accepted token each).
  std::vector<int32_t> numAccepted;
};

struct DecodeResult {
  std::vector<double> o;    ///< [B, T, HV, V]
  std::vector<double> pool; ///< the pool after the call
};

/// "" when the problem is consistent, else what is wrong.
std::string checkDecodeShapes(const DecodeProblem &p);

/// The slot sequence `seq` starts from, or -1 for "zero state": slots[seq],
/// or with perToken slots[seq, numAccepted[seq] - 1]; an index outside
/// [0, numSlots) or a count outside [1, T] is -1 too.
int64_t decodeReadSlot(const DecodeProblem &p, int64_t seq);

/// Which of the pool's numSlots slots the call writes: slots[seq] (or,
/// with perToken, every slots[seq, t]) inside [0, numSlots). Every other
/// slot must keep its exact bits. Judge that by membership, not by value: a
/// written element can legitimately come back equal to its old value (with
/// bf16 inputs the products k_t v_t^T of a few tokens can cancel exactly).
std::vector<bool> decodeWrittenSlots(const DecodeProblem &p);

/// The first element of `after` (the pool as a call left it) that differs
/// from p.pool inside a slot the call must not write, or -1 when every such
/// slot kept its exact bits.
int64_t firstChangedUnwrittenElement(const DecodeProblem &p,
                                     const std::vector<double> &after);

/// The call: for each sequence, the recurrence from its read slot's state
/// (or zero) over its T tokens; the state after the last token goes to its
/// slot, or with perToken the state after token t to slots[seq, t], where
/// the index is in range. Requires checkDecodeShapes(p) to be "".
DecodeResult runDecodeReference(const DecodeProblem &p);

/// Tokens [t0, t0 + n) of every batch row of `full` (not varlen), as a
/// problem of its own without an initial state: one decode call's step out
/// of a longer sequence.
Problem sliceTokens(const Problem &full, int64_t t0, int64_t n);

/// Rows [t0, t0 + n) of every batch row of an output o [B, T, HV, V].
std::vector<double> outputRows(const std::vector<double> &o, const Spec &spec,
                               int64_t batch, int64_t seqLen, int64_t t0,
                               int64_t n);

} // namespace lina::reference

#endif // LINA_REFERENCE_DECODEREFERENCE_H
