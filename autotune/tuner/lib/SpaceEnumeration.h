//===- SpaceEnumeration.h - A space as its knobs' cross product -*- C++ -*-===//
//
// Part of lina. How the forward's and the backward's spaces are walked and
// held to the device, written once for any schedule type: what differs is
// only how a candidate is planned (SearchSpace.cpp, BackwardSearchSpace.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_LIB_SPACEENUMERATION_H
#define LINA_AUTOTUNE_LIB_SPACEENUMERATION_H

#include "lina/Autotune/DeviceLimits.h"
#include "lina/Autotune/SearchKnob.h"
#include "lina/Autotune/SpaceCandidate.h"

#include <string>
#include <vector>

namespace lina::space {

/// Every schedule of the knobs' cross product, in a stable order (the
/// first knob outermost), each passed to `prune(candidate)` to plan it and
/// say why it cannot run. None when a knob has no value (e.g. value_dim <
/// 16: no tile-v to try).
template <typename Schedule, typename Prune>
std::vector<BasicSpaceCandidate<Schedule>>
enumerate(const std::vector<SearchKnob<Schedule>> &knobs, Prune prune) {
  std::vector<BasicSpaceCandidate<Schedule>> out;
  for (const SearchKnob<Schedule> &k : knobs)
    if (k.values.empty())
      return out;
  // An odometer over the knobs, the last one turning fastest.
  std::vector<size_t> index(knobs.size(), 0);
  while (true) {
    BasicSpaceCandidate<Schedule> c;
    for (size_t k = 0; k < knobs.size(); ++k)
      knobs[k].set(c.schedule, knobs[k].values[index[k]]);
    prune(c);
    out.push_back(std::move(c));
    size_t k = knobs.size();
    while (k > 0 && ++index[k - 1] == knobs[k - 1].values.size())
      index[--k] = 0;
    if (k == 0)
      return out;
  }
}

/// Why a planned candidate cannot run on a device with `limits`: more
/// shared memory than a CTA may opt into, or more threads than a block may
/// have; "" when it fits.
inline std::string exceededLimit(int64_t sharedBytes, int64_t threads,
                                 const DeviceLimits &limits) {
  if (sharedBytes > limits.sharedMemoryPerBlockOptin)
    return "needs " + std::to_string(sharedBytes) +
           " bytes of shared memory; the device allows " +
           std::to_string(limits.sharedMemoryPerBlockOptin);
  if (threads > limits.maxThreadsPerBlock)
    return "needs " + std::to_string(threads) +
           " threads per block; the device allows " +
           std::to_string(limits.maxThreadsPerBlock);
  return "";
}

/// Both spaces' reason for a tile-v that leaves part of value_dim over,
/// found before planning.
inline constexpr const char *kTileVDoesNotDivide =
    "tile-v does not divide value_dim";

/// The planner's refusal as a candidate's reason: its first line.
inline std::string firstLine(const std::string &message) {
  return message.substr(0, message.find('\n'));
}

} // namespace lina::space

#endif // LINA_AUTOTUNE_LIB_SPACEENUMERATION_H
