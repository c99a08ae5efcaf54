//===- BackwardChecks.h - What a backward call must satisfy -----*- C++ -*-===//
//
// Part of lina. The checks BackwardKernel::backward() makes before it
// launches, as pure functions of pointers and sizes (testable without a
// GPU), and the gradient buffers of a call with their sizes.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_RUNTIME_BACKWARDCHECKS_H
#define LINA_RUNTIME_BACKWARDCHECKS_H

#include "lina/Runtime/BackwardKernel.h"

#include <cstdint>
#include <vector>

namespace lina {

/// One gradient of a backward call and the input it belongs to.
struct GradientExtent {
  const char *name;      ///< "dq", ..., "dInitialState"
  float *pointer;        ///< the fp32 buffer, or null
  const char *inputName; ///< "q", ..., "initialState"
  bool inputGiven;
  uint64_t elements;     ///< the input's elements (0 where it is not given)
};

/// The ten gradients of BackwardArgs in order, with their inputs' element
/// counts for this call's shape. Assumes the forward's sizes were checked.
std::vector<GradientExtent> gradientExtents(const Spec &spec,
                                            const BackwardArgs &args);

/// Everything backward() checks before launching: `forward.o` and
/// `forward.finalState` null; dO given; dFinalState only with a final
/// state; the forward's checks on the inputs (checkForwardArgs, with dO in
/// o's place and dFinalState in the final state's); each gradient required
/// exactly where its input is given, 4-byte aligned, and overlapping no
/// tensor of the call nor another gradient. OK or InvalidArgument naming
/// the problem and the fix.
Status checkBackwardArgs(const BackwardPlan &plan, const BackwardArgs &args);

} // namespace lina

#endif // LINA_RUNTIME_BACKWARDCHECKS_H
