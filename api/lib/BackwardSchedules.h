//===- BackwardSchedules.h - The backward's tuned schedule per bucket -*- C++ -*-===//
//
// Part of lina. Which backward schedule lina_backward_create_for_shape
// gives a (spec, shape bucket, device) when the caller sets no knob: the
// tuned one (BackwardTuning.h) or the default, looked up once and
// remembered until lina_tune may have changed it.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_API_BACKWARDSCHEDULES_H
#define LINA_API_BACKWARDSCHEDULES_H

namespace lina::capi {

/// Forgets every remembered choice, so that the next
/// lina_backward_create_for_shape looks the tuned schedule up again.
void forgetBackwardSchedules();

} // namespace lina::capi

#endif // LINA_API_BACKWARDSCHEDULES_H
