//===- ForwardChecks.cpp - What a forward call is checked for ----------===//
//
// Part of lina. Host-only checks: nothing here touches the device, so the
// unit tests call them with made-up pointers.
//
//===----------------------------------------------------------------------===//
#include "lina/Runtime/ForwardChecks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

namespace lina {

namespace {

Status invalid(const std::string &message) {
  return Status::error(StatusCode::InvalidArgument, message);
}

uint64_t elementBytes(DType d) { return d == DType::F32 ? 4 : 2; }

std::string hex(const void *p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

/// The product of \p factors, or false when it does not fit in 63 bits.
bool product(std::initializer_list<int64_t> factors, int64_t &out) {
  int64_t r = 1;
  for (int64_t f : factors)
    if (f < 0 || __builtin_mul_overflow(r, f, &r))
      return false;
  out = r;
  return true;
}

/// A required pointer is present and aligned; an unused one is absent (a
/// stray pointer means the caller and the spec disagree), unless the
/// caller's spec as written names it (`named`): the kernel then ignores it.
Status checkPointer(const void *p, const char *name, bool used, size_t align,
                    const char *why, bool named = false) {
  if (used && !p)
    return invalid(std::string("'") + name + "' is required: " + why);
  if (!used && p && !named)
    return invalid(std::string("'") + name +
                   "' was given but the spec does not use it: " + why);
  if (p && reinterpret_cast<uintptr_t>(p) % align != 0)
    return invalid(std::string("'") + name + "' (" + hex(p) +
                   ") is not aligned to " + std::to_string(align) +
                   " bytes, which the kernel's loads and stores need: pass a "
                   "tensor that starts at a multiple of " +
                   std::to_string(align) +
                   " bytes (a fresh allocation or a copy)");
  return Status();
}

/// Sequences of the call: the batch, or numSequences when varlen.
int64_t sequencesOf(const Spec &s, const ForwardArgs &a) {
  return s.varlen ? a.numSequences : a.batch;
}

/// Element counts of every tensor a call with this shape could pass; false
/// when one overflows. Kept in one place so that the extents, the size
/// check and needs64BitIndex agree.
struct Elements {
  int64_t qk = 0, vo = 0, ab = 0, g = 0, beta = 0, aLog = 0, dtBias = 0,
          state = 0, cuSeqlens = 0, workspace = 0;
};

bool elementsOf(const KernelPlan *plan, const Spec &s, int64_t batch,
                int64_t seqLen, int64_t sequences, Elements &e) {
  int64_t tokens = 0;
  bool ok = product({batch, seqLen}, tokens) &&
            product({tokens, s.heads, s.keyDim}, e.qk) &&
            product({tokens, s.valueHeads, s.valueDim}, e.vo) &&
            product({tokens, s.valueHeads, s.keyDim}, e.ab) &&
            product({tokens, s.valueHeads}, e.beta) &&
            product({sequences, s.valueHeads, s.keyDim, s.valueDim}, e.state) &&
            product({s.valueHeads, s.gateWidth()}, e.dtBias);
  if (!ok)
    return false;
  e.aLog = s.valueHeads;
  e.cuSeqlens = sequences + 1;
  if (s.decay == DecayKind::FixedPerHead)
    e.g = s.valueHeads;
  else if (!product({tokens, s.valueHeads, s.gateWidth()}, e.g))
    return false;
  if (plan && plan->strategy != Strategy::FusedScan && plan->chunkSize > 0) {
    // As forward() allocates it.
    if (!product({plan->workspaceSlots(tokens, sequences), s.valueHeads,
                  plan->workspaceRecordFloats()},
                 e.workspace))
      return false;
  }
  return true;
}

} // namespace

size_t requiredTensorAlignment(DType dtype) {
  return std::max<size_t>(elementBytes(dtype), kTensorAccessBytes);
}

std::vector<TensorExtent> tensorExtents(const Spec &s, const ForwardArgs &a) {
  Elements e;
  if (!elementsOf(nullptr, s, a.batch, a.seqLen, sequencesOf(s, a), e))
    return {};
  uint64_t el = elementBytes(s.dtype);
  std::vector<TensorExtent> out;
  auto add = [&](const char *name, const void *p, int64_t elements,
                 uint64_t bytesPer, bool output) {
    if (p)
      out.push_back(
          {name, p, static_cast<uint64_t>(elements) * bytesPer, output});
  };
  add("q", a.q, e.qk, el, false);
  add("k", a.k, e.qk, el, false);
  add("v", a.v, e.vo, el, false);
  add("g", a.g, e.g, 4, false);
  add("beta", a.beta, e.beta, 4, false);
  add("a", a.a, e.ab, el, false);
  add("b", a.b, e.ab, el, false);
  add("gateALog", a.gateALog, e.aLog, 4, false);
  add("gateDtBias", a.gateDtBias, e.dtBias, 4, false);
  add("initialState", a.initialState, e.state, 4, false);
  add("cuSeqlens", a.cuSeqlens, e.cuSeqlens, 8, false);
  add("o", a.o, e.vo, el, true);
  add("finalState", a.finalState, e.state, 4, true);
  return out;
}

bool needs64BitIndex(const KernelPlan &plan, int64_t batch, int64_t seqLen,
                     int64_t numSequences) {
  Elements e;
  int64_t sequences = plan.spec.varlen ? numSequences : batch;
  if (!elementsOf(&plan, plan.spec, batch, seqLen, sequences, e))
    return true;
  constexpr int64_t kLimit = int64_t(1) << 31;
  for (int64_t n : {e.qk, e.vo, e.ab, e.g, e.beta, e.state, e.workspace})
    if (n >= kLimit)
      return true;
  return false;
}

Status checkForwardArgs(const KernelPlan &plan, const ForwardArgs &args) {
  const Spec &s = plan.spec;
  // The spec the caller wrote may name inputs lina-specialize dropped.
  const Spec &w = plan.written ? *plan.written : s;
  size_t el = requiredTensorAlignment(s.dtype);
  bool dplr = s.update == UpdateRule::DPLR,
       writtenDplr = w.update == UpdateRule::DPLR;
  bool computedGate = s.gate != GateSource::Given;
  LINA_RETURN_IF_ERROR(checkPointer(args.q, "q", true, el, "[B, T, H, K]"));
  LINA_RETURN_IF_ERROR(checkPointer(args.k, "k", true, el, "[B, T, H, K]"));
  LINA_RETURN_IF_ERROR(checkPointer(args.v, "v", true, el, "[B, T, HV, V]"));
  LINA_RETURN_IF_ERROR(checkPointer(args.o, "o", true, el, "[B, T, HV, V]"));
  LINA_RETURN_IF_ERROR(checkPointer(args.g, "g", s.hasGate(), 4,
                                    "fp32 log gates (decay is not none)"));
  LINA_RETURN_IF_ERROR(checkPointer(args.beta, "beta",
                                    s.beta != BetaSource::None, 4,
                                    "fp32 [B, T, HV]",
                                    w.beta != BetaSource::None));
  LINA_RETURN_IF_ERROR(checkPointer(
      args.a, "a", dplr && s.lowRankA == LowRankSource::Input, el,
      "[B, T, HV, K] (dplr with low_rank_a = input)",
      writtenDplr && w.lowRankA == LowRankSource::Input));
  LINA_RETURN_IF_ERROR(checkPointer(
      args.b, "b", dplr && s.lowRankB == LowRankSource::Input, el,
      "[B, T, HV, K] (dplr with low_rank_b = input)",
      writtenDplr && w.lowRankB == LowRankSource::Input));
  LINA_RETURN_IF_ERROR(checkPointer(args.gateALog, "gateALog", computedGate, 4,
                                    "fp32 [HV] (gate computed in the kernel)"));
  if (args.gateDtBias && !computedGate)
    return invalid("'gateDtBias' was given but the gate is not computed in "
                   "the kernel");
  LINA_RETURN_IF_ERROR(checkPointer(args.gateDtBias, "gateDtBias",
                                    args.gateDtBias != nullptr, 4, ""));
  LINA_RETURN_IF_ERROR(checkPointer(args.initialState, "initialState",
                                    s.initialState, 4,
                                    "fp32 [N, HV, K, V] (spec initial_state)"));
  LINA_RETURN_IF_ERROR(checkPointer(args.finalState, "finalState", s.finalState,
                                    4,
                                    "fp32 [N, HV, K, V] (spec final_state)"));
  LINA_RETURN_IF_ERROR(checkPointer(args.cuSeqlens, "cuSeqlens", s.varlen, 8,
                                    "int64 [N + 1] (spec varlen)"));
  if (args.batch < 1 || args.seqLen < 0)
    return invalid("batch must be at least 1 and seqLen at least 0, got " +
                   std::to_string(args.batch) + " and " +
                   std::to_string(args.seqLen));
  if (s.varlen && (args.batch != 1 || args.numSequences < 1))
    return invalid("varlen packs sequences along T: batch must be 1 and "
                   "numSequences at least 1");

  int64_t sequences = sequencesOf(s, args);
  Elements e;
  if (!elementsOf(&plan, s, args.batch, args.seqLen, sequences, e) ||
      e.vo > INT64_MAX / 8 || e.qk > INT64_MAX / 8 || e.g > INT64_MAX / 8 ||
      e.state > INT64_MAX / 8 || e.workspace > INT64_MAX / 8)
    return invalid("the call is too large: B = " + std::to_string(args.batch) +
                   ", T = " + std::to_string(args.seqLen) +
                   ", N = " + std::to_string(sequences) +
                   " give tensors whose size overflows 64 bits");
  int64_t ctas = sequences * s.valueHeads * plan.valueTiles();
  if (ctas > INT32_MAX)
    return invalid("too many (sequence, head, value tile) blocks: " +
                   std::to_string(ctas));
  int64_t chunks = plan.chunkSize > 0
                       ? (args.seqLen + plan.chunkSize - 1) / plan.chunkSize
                       : 0;
  if (plan.strategy != Strategy::FusedScan && chunks > 65535)
    return invalid("more than 65535 chunks per sequence: use a larger chunk "
                   "size or the fused strategy");
  if (!plan.index64 &&
      needs64BitIndex(plan, args.batch, args.seqLen, args.numSequences))
    return invalid("a tensor of this call has 2^31 elements or more, but the "
                   "kernel computes 32-bit offsets: use a kernel planned with "
                   "64-bit indexing, or split the call");

  // An output that shares bytes with another tensor would be read after the
  // kernel wrote it (or written twice): reject any overlap, exact aliasing
  // included, since no kernel promises in-place updates.
  std::vector<TensorExtent> extents = tensorExtents(s, args);
  for (const TensorExtent &out : extents) {
    if (!out.output || out.bytes == 0)
      continue;
    auto lo = reinterpret_cast<uintptr_t>(out.pointer);
    for (const TensorExtent &other : extents) {
      if (&other == &out || other.bytes == 0 || (other.output && &other < &out))
        continue;
      auto otherLo = reinterpret_cast<uintptr_t>(other.pointer);
      if (lo < otherLo + other.bytes && otherLo < lo + out.bytes)
        return invalid("'" + std::string(out.name) + "' (" + hex(out.pointer) +
                       ", " + std::to_string(out.bytes) + " bytes) overlaps '" +
                       other.name + "' (" + hex(other.pointer) + ", " +
                       std::to_string(other.bytes) +
                       " bytes): an output must not share memory with any "
                       "other tensor of the call; pass a separate buffer");
    }
  }
  return Status();
}

Status checkCuSeqlensValues(const int64_t *cu, int64_t count, int64_t seqLen) {
  if (count < 2)
    return invalid("'cuSeqlens' needs N + 1 >= 2 entries, got " +
                   std::to_string(count));
  if (cu[0] != 0)
    return invalid("'cuSeqlens' must start at 0, got cuSeqlens[0] = " +
                   std::to_string(cu[0]) +
                   ": pass the offsets of each sequence's first token, with "
                   "a leading 0");
  for (int64_t i = 0; i + 1 < count; ++i)
    if (cu[i + 1] < cu[i])
      return invalid("'cuSeqlens' must be non-decreasing, but cuSeqlens[" +
                     std::to_string(i) + "] = " + std::to_string(cu[i]) +
                     " > cuSeqlens[" + std::to_string(i + 1) +
                     "] = " + std::to_string(cu[i + 1]) +
                     ": pass cumulative sequence lengths");
  if (cu[count - 1] != seqLen)
    return invalid("'cuSeqlens' must end at T = " + std::to_string(seqLen) +
                   ", got cuSeqlens[" + std::to_string(count - 1) +
                   "] = " + std::to_string(cu[count - 1]) +
                   ": the sequences must cover the packed tokens exactly");
  return Status();
}

Status checkFiniteValues(const char *name, const float *values, int64_t count,
                         int64_t firstIndex) {
  for (int64_t i = 0; i < count; ++i)
    if (!std::isfinite(values[i]))
      return invalid(std::string("'") + name + "' holds " +
                     (std::isnan(values[i]) ? "NaN" : "Inf") + " at element " +
                     std::to_string(firstIndex + i) +
                     ": the kernel would spread it through the state; fix "
                     "the producer of '" +
                     name + "'");
  return Status();
}

bool inputChecksRequestedByEnvironment() {
  static const bool requested = [] {
    const char *v = std::getenv("LINA_CHECK_INPUTS");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  return requested;
}

} // namespace lina
