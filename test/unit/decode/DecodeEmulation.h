//===- DecodeEmulation.h - Run Decode.cuh on the CPU -------------*- C++ -*-===//
//
// Part of lina. The decode device library compiled as host C++, and a
// launcher that runs a grid the way the GPU would: every CTA, every warp,
// 32 threads per warp. Slow (a thread per lane), so tests keep problems
// small; what it buys is that the kernel's own indexing, lane mapping,
// shuffles and slot logic are checked without a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TEST_DECODE_DECODEEMULATION_H
#define LINA_TEST_DECODE_DECODEEMULATION_H

#include "lina/Reference/DeviceCheck.h"

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

// (CMake turns off -Wunknown-pragmas for this target: GCC does not know
// `#pragma unroll` and cannot be told so from inside the file.)
#define LINA_DECODE_HOST_SHIM "DecodeHostShim.inc"
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

/// Runs decode_warp<C, VW, vFirst> over the grid DecodeKernel::forward
/// launches.
template <class C, int VW>
void emulateLaunch(const lina_decode::DecodeParams &p, int warps,
                   bool vFirst = false) {
  const int64_t tiles = (C::V + warps * VW - 1) / (warps * VW);
  const int64_t ctas = p.batch * C::HV * tiles;
  for (int64_t cta = 0; cta < ctas; ++cta)
    for (int warp = 0; warp < warps; ++warp) {
      lina_decode::HostWarp state;
      std::vector<std::thread> lanes;
      for (int lane = 0; lane < 32; ++lane)
        lanes.emplace_back([&, lane] {
          lina_decode::hostLane = {lane, warp, warps, cta, &state};
          if (vFirst)
            lina_decode::decode_warp<C, VW, true>(p);
          else
            lina_decode::decode_warp<C, VW, false>(p);
        });
      for (std::thread &t : lanes)
        t.join();
    }
}

} // namespace lina::decodetest

#endif // LINA_TEST_DECODE_DECODEEMULATION_H
