//===- ServingInputs.cpp - A packed decode call's bytes ----------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Reference/DeviceCheck.h"

namespace lina::reference {
namespace {

template <typename T>
void append(std::vector<T> &to, const std::vector<T> &from) {
  to.insert(to.end(), from.begin(), from.end());
}

} // namespace

HostInputs encodeServingCall(ServingCall &call) {
  HostInputs packed;
  packed.cuSeqlens = servingOffsets(call);
  bool first = true;
  for (size_t n = 0; n < call.sequences.size(); ++n) {
    if (call.lengths[n] == 0)
      continue;
    HostInputs in = encodeProblem(call.sequences[n]);
    append(packed.q, in.q);
    append(packed.k, in.k);
    append(packed.v, in.v);
    append(packed.a, in.a);
    append(packed.b, in.b);
    append(packed.beta, in.beta);
    // A fixed decay is per head, not per token: the call's, once.
    if (call.spec.decay != DecayKind::FixedPerHead || first)
      append(packed.g, in.g);
    if (first) {
      packed.gateALog = in.gateALog;
      packed.gateDtBias = in.gateDtBias;
    }
    first = false;
  }
  return packed;
}

} // namespace lina::reference
