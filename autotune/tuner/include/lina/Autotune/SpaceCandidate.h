//===- SpaceCandidate.h - One schedule of a tune's space --------*- C++ -*-===//
//
// Part of lina. A candidate of a search space, for any schedule type: the
// forward's (SearchSpace.h) and the backward's (BackwardSearchSpace.h)
// spaces hold the same facts of each schedule, what its plan needs and
// why it cannot run here.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_SPACECANDIDATE_H
#define LINA_AUTOTUNE_SPACECANDIDATE_H

#include <cstdint>
#include <string>

namespace lina {

template <typename Schedule> struct BasicSpaceCandidate {
  Schedule schedule;
  int64_t sharedBytes = 0; ///< the larger kernel's, when it planned
  int64_t threads = 0;     ///< per CTA, when it planned
  /// Why it cannot run here (the planner's first line, or the limit it
  /// passes); empty for a viable candidate.
  std::string pruned;
  bool viable() const { return pruned.empty(); }
};

} // namespace lina

#endif // LINA_AUTOTUNE_SPACECANDIDATE_H
