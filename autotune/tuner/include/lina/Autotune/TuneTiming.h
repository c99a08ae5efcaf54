//===- TuneTiming.h - Timing a kernel the way a tune must -------*- C++ -*-===//
//
// Part of lina. One forward call timed with CUDA events after warm-up calls,
// the median of several, with the inputs and outputs rotated over enough
// copies that each call finds its data out of L2: a schedule must not win
// because the previous call left its inputs in cache, which a model's real
// calls never do.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_TUNETIMING_H
#define LINA_AUTOTUNE_TUNETIMING_H

#include "lina/Reference/DeviceCheck.h"
#include "lina/Runtime/ChunkKernel.h"
#include "lina/Runtime/Memory.h"

#include <functional>
#include <vector>

namespace lina {

/// Twice the L2 of the largest current GPUs (H100/H200: 50-60 MB): rotating
/// over this much data leaves nothing of a call's inputs in L2 for the next.
inline constexpr size_t kTimingFlushBytes = size_t(128) << 20;
/// Tokens of random data per sequence; longer sequences repeat them
/// (repeatTokens says why).
inline constexpr int64_t kTimingDistinctTokens = 512;

/// Copies of one problem's inputs and outputs on the device, each with its
/// ForwardArgs. Uploaded once per tune and shared by every candidate (the
/// layouts depend on the spec only, not on the schedule).
class RotatingInputs {
public:
  /// Enough copies that their total passes `flushBytes` (at most 8).
  /// `host` holds `batch` sequences of `seqLen` tokens, as a spec without
  /// varlen has them. A varlen spec gets them packed, as one row of
  /// batch x seqLen tokens with cu_seqlens at every seqLen: the same bytes,
  /// since [B, T, ...] and [1, B T, ...] are one layout.
  static Expected<RotatingInputs> upload(const Spec &spec, int64_t batch,
                                         int64_t seqLen,
                                         const reference::HostInputs &host,
                                         int device, size_t flushBytes);
  size_t copies() const { return args_.size(); }
  const ForwardArgs &args(size_t i) const { return args_[i % args_.size()]; }

private:
  std::vector<cuda::DeviceBuffer> buffers_;
  std::vector<ForwardArgs> args_;
};

/// Inputs for `batch` sequences of `seqLen` tokens made by repeating the
/// tokens of `small` (`batch` sequences of `smallLen` tokens) along T.
/// Making a float64 random problem at 1 x 8192 x 96 heads takes many
/// seconds; timing needs valid values (gates, norms), not fresh ones, and
/// repeated tokens do not make a kernel faster. A fixed per-head gate
/// (RetNet's [HV]) has no tokens and stays as it is.
reference::HostInputs repeatTokens(const Spec &spec,
                                   const reference::HostInputs &small,
                                   int64_t batch, int64_t smallLen,
                                   int64_t seqLen);

/// A new buffer of `bytes` bytes on `device` (none, and a null `pointer`,
/// for 0), filled from `data` when it is given, kept alive in `buffers`.
Status uploadBuffer(int device, const void *data, size_t bytes,
                    std::vector<cuda::DeviceBuffer> &buffers, void *&pointer);

struct Timing {
  double medianMs = 0;
  int calls = 0; ///< timed calls the median is of
  bool stoppedEarly = false;
};

/// Enqueues call number `call` (0, 1, ...: which copy of rotating inputs it
/// takes) on `stream`.
using TimedLaunch = std::function<Status(size_t call)>;

/// `warmup` calls of `launch`, then `repeats` timed ones, each between CUDA
/// events on `stream`. A candidate whose first call (or first timed call) is
/// slower than `giveUpMs` (> 0) is timed by that call alone: it cannot win,
/// and a full sweep should not wait for its repeats.
Expected<Timing> timeCalls(const TimedLaunch &launch, cuda::CUstream stream,
                           int device, int warmup, int repeats,
                           double giveUpMs);

/// timeCalls of the kernel's forward, rotating over the copies.
Expected<Timing> timeForward(const ChunkKernel &kernel,
                             const RotatingInputs &inputs, int device,
                             int warmup, int repeats, double giveUpMs);

} // namespace lina

#endif // LINA_AUTOTUNE_TUNETIMING_H
