//===- BackwardChecks.cpp - What a backward call must satisfy ------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Runtime/BackwardChecks.h"
#include "lina/Runtime/ForwardChecks.h"

#include <cstring>
#include <string>

namespace lina {

namespace {

Status invalid(const std::string &message) {
  return Status::error(StatusCode::InvalidArgument, message);
}

/// The forward plan the checks of a backward call read: the spec (with a
/// final state only where dL/d(final state) is given, which the forward's
/// checks then require in the final state's place), the chunk size and the
/// value tiles.
KernelPlan checkedPlan(const BackwardPlan &plan, bool finalStateGrad) {
  KernelPlan forward;
  forward.spec = plan.spec;
  forward.spec.finalState = finalStateGrad;
  // Inputs the caller's spec names pass, as in a forward call; their
  // gradients are zeroed with the others and nothing adds to them.
  forward.written = plan.written;
  forward.chunkSize = plan.chunkSize;
  forward.tileV = plan.tileV;
  forward.threads = plan.threads;
  forward.strategy = Strategy::Materialize;
  return forward;
}

/// The forward's view of a backward call: dO stands where o does, and
/// dL/d(final state) where the final state does (both are read, not
/// written, but have those tensors' shapes).
ForwardArgs forwardView(const BackwardArgs &args) {
  ForwardArgs view = args.forward;
  view.o = const_cast<void *>(args.dO);
  view.finalState = const_cast<float *>(args.dFinalState);
  return view;
}

uint64_t elementBytesOf(const char *input, DType dtype) {
  for (const char *narrow : {"q", "k", "v", "a", "b"})
    if (std::strcmp(input, narrow) == 0)
      return dtype == DType::F32 ? 4 : 2;
  return 4;
}

} // namespace

std::vector<GradientExtent> gradientExtents(const Spec &spec,
                                            const BackwardArgs &a) {
  const ForwardArgs &f = a.forward;
  std::vector<GradientExtent> out = {
      {"dq", a.dq, "q", f.q != nullptr, 0},
      {"dk", a.dk, "k", f.k != nullptr, 0},
      {"dv", a.dv, "v", f.v != nullptr, 0},
      {"dg", a.dg, "g", f.g != nullptr, 0},
      {"dBeta", a.dBeta, "beta", f.beta != nullptr, 0},
      {"da", a.da, "a", f.a != nullptr, 0},
      {"db", a.db, "b", f.b != nullptr, 0},
      {"dGateALog", a.dGateALog, "gateALog", f.gateALog != nullptr, 0},
      {"dGateDtBias", a.dGateDtBias, "gateDtBias", f.gateDtBias != nullptr, 0},
      {"dInitialState", a.dInitialState, "initialState",
       f.initialState != nullptr, 0}};
  Spec view = spec;
  view.finalState = a.dFinalState != nullptr;
  for (const TensorExtent &input : tensorExtents(view, forwardView(a)))
    for (GradientExtent &g : out)
      if (std::strcmp(input.name, g.inputName) == 0)
        g.elements = input.bytes / elementBytesOf(g.inputName, spec.dtype);
  return out;
}

Status checkBackwardArgs(const BackwardPlan &plan, const BackwardArgs &args) {
  if (args.forward.o || args.forward.finalState)
    return invalid("'forward.o' and 'forward.finalState' must be null in a "
                   "backward call: pass dL/do as dO and dL/d(final state) as "
                   "dFinalState");
  if (!args.dO)
    return invalid("'dO' is required: dL/do in the spec's dtype, "
                   "[B, T, HV, V]");
  if (args.dFinalState && !plan.spec.finalState)
    return invalid("'dFinalState' was given but the spec has no final "
                   "state (set final_state = true)");
  KernelPlan forward = checkedPlan(plan, args.dFinalState != nullptr);
  ForwardArgs view = forwardView(args);
  LINA_RETURN_IF_ERROR(checkForwardArgs(forward, view));

  std::vector<TensorExtent> extents = tensorExtents(forward.spec, view);
  std::vector<TensorExtent> gradients;
  for (const GradientExtent &g : gradientExtents(plan.spec, args)) {
    if (g.inputGiven != (g.pointer != nullptr))
      return invalid(std::string("'") + g.name + "' " +
                     (g.inputGiven ? "is required: '" +
                                         std::string(g.inputName) +
                                         "' is given, so it has a gradient"
                                   : "was given but '" +
                                         std::string(g.inputName) +
                                         "' is not: pass null"));
    if (!g.pointer)
      continue;
    if (reinterpret_cast<uintptr_t>(g.pointer) % 4 != 0)
      return invalid(std::string("'") + g.name +
                     "' must be 4-byte aligned (fp32)");
    gradients.push_back({g.name, g.pointer, g.elements * 4, true});
  }
  for (const TensorExtent &out : gradients) {
    auto lo = reinterpret_cast<uintptr_t>(out.pointer);
    auto overlaps = [&](const TensorExtent &other) {
      auto otherLo = reinterpret_cast<uintptr_t>(other.pointer);
      return other.bytes > 0 && out.bytes > 0 && lo < otherLo + other.bytes &&
             otherLo < lo + out.bytes;
    };
    for (const TensorExtent &other : extents)
      if (overlaps(other)) {
        std::string name = other.name;
        if (name == "o")
          name = "dO";
        else if (name == "finalState")
          name = "dFinalState";
        return invalid("'" + std::string(out.name) + "' overlaps '" + name +
                       "': a gradient must not share memory with any other "
                       "tensor of the call; pass a separate buffer");
      }
    for (const TensorExtent &other : gradients)
      if (&other < &out && overlaps(other))
        return invalid("'" + std::string(out.name) + "' overlaps '" +
                       other.name +
                       "': pass a separate buffer for each gradient");
  }
  return Status();
}

} // namespace lina
