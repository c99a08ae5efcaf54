//===- DecodeEmulation.h - Decode.cuh on the emulated device ----*- C++ -*-===//
//
// Part of lina. The decode device library compiled into the test as host
// C++ on the runtime's emulated device (runtime/lib/Runtime/
// EmulatedDevice.cuh: each CTA's threads as fibers, warp shuffles as warp
// collectives, vector accesses that trap where the GPU's would fault), and
// a launcher that runs the grid DecodeKernel::forward launches. Slow (a
// fiber a thread), so tests keep problems small; what it buys is that the
// kernel's own indexing, lane mapping, shuffles and slot logic are checked
// without a GPU, for configurations the test writes as template arguments.
//
// Include it after every other header: the emulated device defines the
// CUDA keywords as macros.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TEST_DECODE_DECODEEMULATION_H
#define LINA_TEST_DECODE_DECODEEMULATION_H

#include "DecodePresetCodes.h"
#include "lina/Reference/DeviceCheck.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "EmulatedDevice.cuh"

#include "Decode.cuh"

namespace lina::decodetest {

/// A spec as Decode.cuh's Config, from template arguments (C++17 has no
/// float template arguments: the scale is 1 / scaleDenominator and the
/// lower bound -lowerBound).
template <typename TT, int K_, int V_, int H_, int HV_, int Decay, int Update,
          int Gate, int Beta, int LowRankA, int LowRankB, int Write, bool L2,
          int ScaleDenominator, int LowerBound = 5>
struct Config {
  typedef TT T;
  static constexpr int K = K_, V = V_, H = H_, HV = HV_;
  static constexpr int DECAY = Decay, UPDATE = Update, GATE = Gate, BETA = Beta;
  static constexpr int LOW_RANK_A = LowRankA, LOW_RANK_B = LowRankB,
                       WRITE = Write;
  static constexpr bool QK_L2NORM = L2;
  static constexpr float SCALE = 1.0f / ScaleDenominator;
  static constexpr float GATE_LOWER_BOUND = -float(LowerBound);
};

/// Preset I at K = V = 16 (scale 1/4), H = 1, HV = 2.
template <int I, typename T = float>
using PresetConfig =
    Config<T, 16, 16, 1, 2, kPresetCodes[I].decay, kPresetCodes[I].update,
           kPresetCodes[I].gate, kPresetCodes[I].beta, kPresetCodes[I].lowRankA,
           kPresetCodes[I].lowRankB, kPresetCodes[I].write, kPresetCodes[I].l2,
           4>;

/// decode_warp<C, VW, VFirst> as a kernel, and its entry for the emulated
/// launch.
template <class C, int VW, bool VFirst>
void decodeKernel(lina_decode::DecodeParams p) {
  lina_decode::decode_warp<C, VW, VFirst>(p);
}
template <class C, int VW, bool VFirst> void decodeEntry(void **args) {
  lina_emu::invoke(decodeKernel<C, VW, VFirst>, args);
}

/// Runs decode_warp<C, VW, vFirst> over the grid DecodeKernel::forward
/// launches (a CTA of `warps` warps a (sequence, value head, value tile));
/// a trap or a deadlock fails the test.
template <class C, int VW>
void emulateLaunch(const lina_decode::DecodeParams &p, int warps,
                   bool vFirst = false) {
  const int64_t tiles = (C::V + warps * VW - 1) / (warps * VW);
  const int64_t ctas = p.batch * C::HV * tiles;
  lina_decode::DecodeParams params = p;
  void *args[] = {&params};
  char message[512] = "";
  int status = lina_emulation_launch(
      vFirst ? decodeEntry<C, VW, true> : decodeEntry<C, VW, false>, args,
      unsigned(ctas), 1, 1, unsigned(warps * 32), 1, 1, 0, message,
      sizeof message);
  EXPECT_EQ(status, 0) << message;
}

} // namespace lina::decodetest

#endif // LINA_TEST_DECODE_DECODEEMULATION_H
