//===- SessionTestUtil.h - Shared helpers of the session tests --*- C++ -*-===//
//
// Part of lina. A small spec and a simulated request, for the tests of
// whole tunes through a session (BasicTuneSessionTest.cpp and the forward's
// and the backward's own).
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TEST_UNIT_TUNE_SESSIONTESTUTIL_H
#define LINA_TEST_UNIT_TUNE_SESSIONTESTUTIL_H

#include "lina/Autotune/TuneRequest.h"
#include "lina/Spec/Presets.h"

namespace lina::tunetest {

/// The preset `name` at 64-dim heads, 4 of them: a small space to tune.
inline Spec smallPreset(const char *name) {
  Spec s = findPreset(name)->spec;
  s.keyDim = s.valueDim = 64;
  s.heads = s.valueHeads = 4;
  return s;
}

/// A fast tune on the cost model of at most `budget` candidates at B=2,
/// T=256, recorded in `db`.
inline TuneRequest simulatedRequest(cache::Cache &db, size_t budget) {
  TuneRequest r;
  r.batch = 2;
  r.seqLen = 256;
  r.budget = budget;
  r.simulate = true;
  r.cache = &db;
  return r;
}

} // namespace lina::tunetest

#endif // LINA_TEST_UNIT_TUNE_SESSIONTESTUTIL_H
