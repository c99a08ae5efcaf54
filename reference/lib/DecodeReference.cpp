//===- DecodeReference.cpp - The decode call's semantics in float64 ----===//
//
// Part of lina. Each token is its own one-token problem for runRecurrent,
// starting from the state the previous token left, so every intermediate
// state (speculative decoding keeps them) comes straight from the oracle.
//
//===----------------------------------------------------------------------===//
#include "lina/Reference/DecodeReference.h"
#include "lina/Reference/Reference.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace lina::reference {
namespace {

/// Copies token `token`'s row (`width` values) of `from`, if it is used.
std::vector<double> tokenRow(const std::vector<double> &from, int64_t token,
                             int64_t width) {
  if (from.empty())
    return {};
  return std::vector<double>(from.begin() + token * width,
                             from.begin() + (token + 1) * width);
}

/// Token `t` of sequence `seq` as a one-token problem starting at `state`.
Problem tokenProblem(const Problem &p, int64_t seq, int64_t t,
                     const std::vector<double> &state) {
  const Spec &s = p.spec;
  const int64_t token = seq * p.seqLen + t, H = s.heads, HV = s.valueHeads,
                K = s.keyDim, V = s.valueDim;
  Problem one;
  one.spec = s;
  one.spec.initialState = true;
  one.spec.finalState = true;
  one.batch = 1;
  one.seqLen = 1;
  one.q = tokenRow(p.q, token, H * K);
  one.k = tokenRow(p.k, token, H * K);
  one.v = tokenRow(p.v, token, HV * V);
  one.g = s.decay == DecayKind::FixedPerHead
              ? p.g
              : tokenRow(p.g, token, HV * s.gateWidth());
  one.gateALog = p.gateALog;
  one.gateDtBias = p.gateDtBias;
  one.beta = tokenRow(p.beta, token, HV);
  one.a = tokenRow(p.a, token, HV * K);
  one.b = tokenRow(p.b, token, HV * K);
  one.initialState = state;
  return one;
}

} // namespace

std::string checkDecodeShapes(const DecodeProblem &p) {
  const Problem &step = p.step;
  if (step.spec.varlen)
    return "decode takes [B, T] batches: spec.varlen must be false";
  Problem probe = step;
  probe.spec.initialState = false;
  probe.initialState.clear();
  if (std::string error = checkShapes(probe); !error.empty())
    return error;
  const Spec &s = step.spec;
  const int64_t headState = s.valueHeads * s.keyDim * s.valueDim;
  if (p.numSlots < 0 || int64_t(p.pool.size()) != p.numSlots * headState)
    return "'pool' must have numSlots * HV * K * V = " +
           std::to_string(p.numSlots * headState) + " values, has " +
           std::to_string(p.pool.size());
  int64_t expected = step.batch * (p.perToken ? step.seqLen : 1);
  if (int64_t(p.slots.size()) != expected)
    return "'slots' must have " + std::to_string(expected) + " entries";
  if (!p.numAccepted.empty() &&
      (!p.perToken || int64_t(p.numAccepted.size()) != step.batch))
    return "'numAccepted' needs perToken slots and one entry per sequence";
  return "";
}

int64_t decodeReadSlot(const DecodeProblem &p, int64_t seq) {
  const int64_t T = p.step.seqLen;
  int64_t slot = p.slots[seq];
  if (p.perToken) {
    int64_t accepted = p.numAccepted.empty() ? 1 : p.numAccepted[seq];
    if (accepted < 1 || accepted > T)
      return -1;
    slot = p.slots[seq * T + accepted - 1];
  }
  return slot >= 0 && slot < p.numSlots ? slot : -1;
}

std::vector<bool> decodeWrittenSlots(const DecodeProblem &p) {
  std::vector<bool> written(std::max<int64_t>(p.numSlots, 0), false);
  for (int32_t slot : p.slots)
    if (slot >= 0 && slot < p.numSlots)
      written[slot] = true;
  return written;
}

int64_t firstChangedUnwrittenElement(const DecodeProblem &p,
                                     const std::vector<double> &after) {
  const std::vector<bool> written = decodeWrittenSlots(p);
  if (written.empty())
    return -1;
  const size_t slotSize = p.pool.size() / written.size();
  for (size_t i = 0; i < after.size() && i < p.pool.size(); ++i)
    if (!written[i / slotSize] && after[i] != p.pool[i])
      return int64_t(i);
  return -1;
}

DecodeResult runDecodeReference(const DecodeProblem &p) {
  if (std::string error = checkDecodeShapes(p); !error.empty()) {
    std::fprintf(stderr, "lina::reference::runDecodeReference: %s\n",
                 error.c_str());
    std::abort();
  }
  const Problem &step = p.step;
  const Spec &s = step.spec;
  const int64_t B = step.batch, T = step.seqLen, HV = s.valueHeads,
                V = s.valueDim;
  const int64_t slotSize = HV * s.keyDim * V;
  auto inRange = [&](int64_t slot) { return slot >= 0 && slot < p.numSlots; };

  DecodeResult result;
  result.o.assign(B * T * HV * V, 0.0);
  result.pool = p.pool;
  // Every sequence reads the pool as it was before the call.
  for (int64_t seq = 0; seq < B; ++seq) {
    int64_t read = decodeReadSlot(p, seq);
    std::vector<double> state(slotSize, 0.0);
    if (read >= 0)
      std::copy(p.pool.begin() + read * slotSize,
                p.pool.begin() + (read + 1) * slotSize, state.begin());
    for (int64_t t = 0; t < T; ++t) {
      Result r = runRecurrent(tokenProblem(step, seq, t, state));
      state = r.finalState;
      std::copy(r.o.begin(), r.o.end(),
                result.o.begin() + (seq * T + t) * HV * V);
      if (p.perToken && inRange(p.slots[seq * T + t]))
        std::copy(state.begin(), state.end(),
                  result.pool.begin() + p.slots[seq * T + t] * slotSize);
    }
    if (!p.perToken && inRange(p.slots[seq]))
      std::copy(state.begin(), state.end(),
                result.pool.begin() + p.slots[seq] * slotSize);
  }
  return result;
}

Problem sliceTokens(const Problem &full, int64_t t0, int64_t n) {
  const Spec &s = full.spec;
  Problem p;
  p.spec = s;
  p.spec.initialState = false;
  p.batch = full.batch;
  p.seqLen = n;
  auto slice = [&](const std::vector<double> &x, int64_t width) {
    std::vector<double> out;
    if (x.empty())
      return out;
    for (int64_t b = 0; b < full.batch; ++b)
      out.insert(out.end(), x.begin() + (b * full.seqLen + t0) * width,
                 x.begin() + (b * full.seqLen + t0 + n) * width);
    return out;
  };
  const int64_t H = s.heads, HV = s.valueHeads, K = s.keyDim, V = s.valueDim;
  p.q = slice(full.q, H * K);
  p.k = slice(full.k, H * K);
  p.v = slice(full.v, HV * V);
  p.g = s.decay == DecayKind::FixedPerHead ? full.g
                                           : slice(full.g, HV * s.gateWidth());
  p.beta = slice(full.beta, HV);
  p.a = slice(full.a, HV * K);
  p.b = slice(full.b, HV * K);
  p.gateALog = full.gateALog;
  p.gateDtBias = full.gateDtBias;
  return p;
}

std::vector<double> outputRows(const std::vector<double> &o, const Spec &s,
                               int64_t B, int64_t T, int64_t t0, int64_t n) {
  const int64_t row = s.valueHeads * s.valueDim;
  std::vector<double> out;
  for (int64_t b = 0; b < B; ++b)
    out.insert(out.end(), o.begin() + (b * T + t0) * row,
               o.begin() + (b * T + t0 + n) * row);
  return out;
}

} // namespace lina::reference
