//===- SearchKnob.h - One axis of a schedule space --------------*- C++ -*-===//
//
// Part of lina. A knob of some schedule type as a named axis with the values
// a tune tries: the forward's ScheduleOptions (ScheduleKnobs.h) and the
// backward's BackwardScheduleOptions (BackwardTuning.h) are searched by the
// same tuner (Tuner.h), which only needs to read and set each knob.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_SEARCHKNOB_H
#define LINA_AUTOTUNE_SEARCHKNOB_H

#include <cstdint>
#include <vector>

namespace lina {

template <typename Schedule> struct SearchKnob {
  const char *name; ///< as the planner's option is spelled, e.g. "tile-v"
  std::vector<int64_t> values;
  int64_t (*get)(const Schedule &);
  void (*set)(Schedule &, int64_t);
};

} // namespace lina

#endif // LINA_AUTOTUNE_SEARCHKNOB_H
