//===- LaunchParams.h - The kernels' parameter block, host side -*- C++ -*-===//
//
// Part of lina. lina::Params of the device prelude (Prelude.cuh) as the host
// fills it, for every launcher of chunk kernels (the forward's and the
// backward's): one definition, checked against the device's layout.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_RUNTIME_LAUNCHPARAMS_H
#define LINA_RUNTIME_LAUNCHPARAMS_H

#include <cstdint>

namespace lina {

/// Same layout as lina::Params in the device prelude (Prelude.cuh).
struct LaunchParams {
  const void *q, *k, *v;
  const float *g, *beta;
  const void *a, *b;
  const float *gateALog, *gateDtBias;
  void *o;
  const float *initialState;
  float *finalState;
  const int64_t *cuSeqlens;
  float *chunkStates;
  float *chunkData;
  long long batch, seqLen, numSeqs;
  long long seqTokens, segments;
};
// 15 pointers and 5 integers, 8 bytes each, no padding: as the device sees it.
static_assert(sizeof(LaunchParams) == 20 * 8,
              "LaunchParams must match lina::Params in Prelude.cuh");

} // namespace lina

#endif // LINA_RUNTIME_LAUNCHPARAMS_H
