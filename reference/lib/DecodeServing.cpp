//===- DecodeServing.cpp - A decode call in the engines' layouts -------===//
//
// Part of lina. Sequence by sequence: the outputs are runDecodeReference's
// over the sequence from its starting state, and the state after token t
// (for per-token slots and intermediate states) its final state over the
// first t + 1 tokens.
//
//===----------------------------------------------------------------------===//
#include "lina/Reference/DecodeServing.h"
#include "lina/Reference/DecodeReference.h"

#include <algorithm>
#include <limits>

namespace lina::reference {
namespace {

/// The state after the first `n` tokens of `seq` from `start`.
std::vector<double> stateAfter(const Problem &seq, int64_t n,
                               const std::vector<double> &start) {
  DecodeProblem one;
  one.step = sliceTokens(seq, 0, n);
  one.pool = start;
  one.numSlots = 1;
  one.slots = {0};
  return runDecodeReference(one).pool;
}

} // namespace

void drawServingCall(ServingCall &call, std::mt19937_64 &rng) {
  Spec stepSpec = call.spec;
  stepSpec.initialState = false;
  stepSpec.finalState = false;
  stepSpec.varlen = false;
  const Problem *first = nullptr;
  call.sequences.assign(call.lengths.size(), Problem());
  for (size_t n = 0; n < call.lengths.size(); ++n) {
    if (call.lengths[n] == 0)
      continue;
    Problem &seq = call.sequences[n];
    seq = randomProblem(stepSpec, 1, call.lengths[n], rng);
    if (!first) {
      first = &seq;
      continue;
    }
    seq.gateALog = first->gateALog;
    seq.gateDtBias = first->gateDtBias;
    if (stepSpec.decay == DecayKind::FixedPerHead)
      seq.g = first->g;
  }
  const int64_t slotSize =
      call.spec.valueHeads * call.spec.keyDim * call.spec.valueDim;
  std::normal_distribution<double> normal;
  call.pool.resize(call.numSlots * slotSize);
  for (double &x : call.pool)
    x = float(normal(rng));
}

std::vector<int64_t> servingOffsets(const ServingCall &call) {
  std::vector<int64_t> offsets = {0};
  for (int64_t length : call.lengths)
    offsets.push_back(offsets.back() + length);
  return offsets;
}

ServingResult runServingReference(const ServingCall &call) {
  const Spec &s = call.spec;
  const int64_t slotSize = s.valueHeads * s.keyDim * s.valueDim;
  const int64_t width = call.perToken ? call.rowWidth : 1;
  auto inRange = [](int64_t i, int64_t n) { return i >= 0 && i < n; };
  ServingResult r;
  r.pool = call.pool;
  r.writtenSlots.assign(call.numSlots, false);
  r.intermediate.assign(call.numIntermediate * call.steps * slotSize, 0.0);
  r.writtenSteps.assign(call.numIntermediate * call.steps, false);
  auto put = [&](std::vector<double> &to, int64_t at,
                 const std::vector<double> &state) {
    std::copy(state.begin(), state.end(), to.begin() + at * slotSize);
  };
  for (size_t n = 0; n < call.lengths.size(); ++n) {
    const int64_t L = call.lengths[n];
    if (L == 0)
      continue; // padding: nothing read or written
    const int32_t *row = call.slots.data() + n * width;
    // Where the sequence starts: its slot, or with per-token slots the
    // accepted prefix's, from the pool as it was before the call.
    int64_t read = row[0];
    if (call.perToken) {
      int64_t a = call.accepted.empty() ? 1 : call.accepted[n];
      read = a >= 1 && a <= call.rowWidth ? row[a - 1] : -1;
    }
    std::vector<double> start(slotSize, 0.0);
    if (inRange(read, call.numSlots))
      std::copy(call.pool.begin() + read * slotSize,
                call.pool.begin() + (read + 1) * slotSize, start.begin());
    DecodeProblem whole;
    whole.step = call.sequences[n];
    whole.pool = start;
    whole.numSlots = 1;
    whole.slots = {0};
    DecodeResult result = runDecodeReference(whole);
    r.o.insert(r.o.end(), result.o.begin(), result.o.end());
    if (call.perToken) {
      for (int64_t t = 0; t < std::min(L, call.rowWidth); ++t)
        if (inRange(row[t], call.numSlots)) {
          put(r.pool, row[t], stateAfter(call.sequences[n], t + 1, start));
          r.writtenSlots[row[t]] = true;
        }
    } else if (!call.disableStateUpdate && inRange(read, call.numSlots)) {
      put(r.pool, read, result.pool);
      r.writtenSlots[read] = true;
    }
    const int64_t inter = !call.intermediateRows.empty()
                              ? call.intermediateRows[n]
                          : call.perToken ? int64_t(n)
                                          : row[0];
    if (!inRange(inter, call.numIntermediate))
      continue;
    for (int64_t t = 0; t < std::min(L, call.steps); ++t) {
      put(r.intermediate, inter * call.steps + t,
          stateAfter(call.sequences[n], t + 1, start));
      r.writtenSteps[inter * call.steps + t] = true;
    }
  }
  return r;
}

std::vector<double> transposeHeads(const std::vector<double> &x, int64_t K,
                                   int64_t V, bool back) {
  std::vector<double> out(x.size());
  const int64_t head = K * V;
  for (size_t h = 0; h < x.size() / head; ++h)
    for (int64_t r = 0; r < K; ++r)
      for (int64_t c = 0; c < V; ++c) {
        size_t kv = h * head + r * V + c, vk = h * head + c * K + r;
        if (back)
          out[kv] = x[vk];
        else
          out[vk] = x[kv];
      }
  return out;
}

} // namespace lina::reference
