//===- CostModel.cpp - A rough time estimate for a schedule ------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/CostModel.h"
#include "lina/Runtime/ChunkKernel.h"
#include "lina/Runtime/KernelForms.h"

#include <algorithm>
#include <cmath>

namespace lina {

double modelMilliseconds(const Spec &spec, const ScheduleOptions &s,
                         int64_t batch, int64_t seqLen,
                         const DeviceLimits &limits, int64_t sharedBytes,
                         int64_t threads) {
  const double C = double(s.chunkSize), K = double(spec.keyDim),
               TV = double(s.tileV);
  // Segments: each sequence's pieces are CTAs of their own, each walking a
  // piece's chunks (as ChunkKernel::forward cuts them).
  SequencePieces pieces{1, seqLen};
  if (s.strategy == Strategy::Split && canRunInSegments(spec))
    pieces = segmentPieces(seqLen, s.segments, s.chunkSize);
  const double chunks =
      std::ceil(double(std::max<int64_t>(pieces.length, 1)) / C);
  const double tiles = double(spec.valueDim) / TV;
  // Flops of one chunk for one value tile: Q K^T and the intra-chunk
  // products (C x C x K, C x C x TV), the state's read and update (C x K x
  // TV, twice).
  const double chunkFlops = 2 * (C * C * K + C * C * TV + 2 * C * K * TV);
  // A warp does ~256 flops per cycle on tensor cores at ~1.7 GHz, but a
  // CTA's warps overlap less the more there are; a barrier per op costs
  // ~30 ns per chunk.
  const double warps = double(s.warps);
  const double rate = 256 * 1.7e9 * warps / (1 + 0.15 * (warps - 1));
  const double chunkSeconds = chunkFlops / rate + 40 * 30e-9;
  const double resident =
      double(
          std::max<int64_t>(1, blocksPerSM(limits, threads, 64, sharedBytes))) *
      double(limits.smCount);
  const double ctas =
      double(batch) * double(pieces.count) * double(spec.valueHeads) * tiles;
  double seconds;
  if (s.strategy == Strategy::FusedScan) {
    // Each CTA walks its chunks in order.
    seconds = std::ceil(ctas / resident) * chunks * chunkSeconds;
  } else {
    // The scan walks the chunks doing the state part only (about a third);
    // the output kernel runs every chunk in parallel, and the workspace
    // round trip costs a state per chunk in memory traffic.
    double scan = std::ceil(ctas / resident) * chunks * chunkSeconds / 3;
    double output = std::ceil(ctas * chunks / resident) * chunkSeconds;
    double traffic = ctas * chunks * K * TV * 4 * 2 / 3e12;
    // The carry reads X (bf16, C x K a chunk) and reads and writes the
    // output (bf16) of every piece after the first.
    double carried = double(batch) * double(seqLen) * double(spec.valueHeads) *
                     double(pieces.count - 1) / double(pieces.count) *
                     (2 * K + 4 * double(spec.valueDim)) / 3e12;
    seconds = scan + output + traffic + carried;
  }
  return seconds * 1e3;
}

} // namespace lina
