//===- lina.h - The C++ API of lina -----------------------------*- C++ -*-===//
//
// Part of lina. A header-only layer over the C API (lina_c.h): RAII handles
// and exceptions instead of status codes. Everything is thread-safe, as the C
// API is; a Kernel is a cheap, copyable handle to a compiled kernel that lina
// caches per (spec, schedule, device), so building one for every call costs a
// lookup after the first.
//
//   lina::Kernel gdn = lina::Kernel::fromPreset("gdn", 128, 128, 16, 16, "bf16");
//   lina::Inputs in = {};            // device pointers, fla's [B, T, H, D] layouts
//   in.q = q; in.k = k; in.v = v; in.g = g; in.beta = beta; in.o = o;
//   in.batch = B; in.seq_len = T; in.stream = stream;
//   gdn.forward(in);                 // throws lina::Error naming the problem
//
// Link with -llina (liblina.so).
//
//===----------------------------------------------------------------------===//
#ifndef LINA_LINA_H
#define LINA_LINA_H

#include "lina/lina_c.h"

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

namespace lina {

/// A failed call: the C API's status and its message.
class Error : public std::runtime_error {
public:
  Error(lina_status status, const std::string &message)
      : std::runtime_error(message), status_(status) {}
  lina_status status() const { return status_; }

private:
  lina_status status_;
};

/// Throws lina::Error for anything but LINA_OK.
inline void check(lina_status status) {
  if (status != LINA_OK)
    throw Error(status, std::string(lina_status_name(status)) + ": " +
                            lina_last_error());
}

/// The spec of a preset (`lina presets` lists them) as MLIR text. dtype is
/// "bf16", "f16" or "f32"; value_heads is a multiple of heads.
inline std::string presetSpec(const std::string &preset, int64_t keyDim,
                              int64_t valueDim, int64_t heads,
                              int64_t valueHeads, const std::string &dtype) {
  char *text = nullptr;
  check(lina_preset_spec(preset.c_str(), keyDim, valueDim, heads, valueHeads,
                         dtype.c_str(), &text));
  std::string spec(text);
  lina_free_string(text);
  return spec;
}

/// How to build a kernel; zeros let lina choose.
struct KernelOptions {
  int64_t chunkSize = 0;
  int64_t tileV = 0;
  int64_t warps = 0;
  lina_strategy strategy = LINA_STRATEGY_DEFAULT;
  /// Run each sequence as up to this many pieces scanned at once (1: whole
  /// sequences; docs/design.md, "Segments").
  int64_t segments = 0;
  /// The matrix products the scan runs on: warp-level mma.sync or Hopper's
  /// warpgroup products (lina_c.h's lina_schedule). `wgmma` is its
  /// deprecated name, which goes in the next release.
  union {
    lina_mma mma = LINA_MMA_DEFAULT;
    [[deprecated("use mma")]] lina_mma wgmma;
  };
  int device = 0;
  /// The shape the kernel will run at (sequences, longest sequence). With
  /// both set and no schedule knob, lina uses the schedule `lina tune` found
  /// for this shape's bucket when its cache has one (never tuning itself).
  int64_t batch = 0;
  int64_t seqLen = 0;
};

/// Device pointers and sizes of one forward call (see lina_c.h for layouts).
using Inputs = lina_forward_args;

class Kernel {
public:
  /// Compiles (or finds in lina's caches: in memory, then the cubin cache on
  /// disk) the kernel for `specText`, a module holding one lina.recurrence
  /// (docs/spec.md).
  static Kernel fromSpec(const std::string &specText,
                         const KernelOptions &options = {}) {
    lina_schedule schedule = {options.chunkSize,     options.tileV,
                              options.warps,         options.strategy,
                              LINA_PREFETCH_DEFAULT, options.segments,
                              {options.mma}};
    lina_kernel *handle = nullptr;
    check(lina_kernel_create_for_shape(specText.c_str(), &schedule,
                                       options.batch, options.seqLen,
                                       options.device, &handle));
    return Kernel(handle);
  }

  static Kernel fromPreset(const std::string &preset, int64_t keyDim,
                           int64_t valueDim, int64_t heads, int64_t valueHeads,
                           const std::string &dtype,
                           const KernelOptions &options = {}) {
    return fromSpec(
        presetSpec(preset, keyDim, valueDim, heads, valueHeads, dtype),
        options);
  }

  /// Checks `inputs` against the spec and launches on inputs.stream;
  /// asynchronous like any launch. Throws lina::Error (nothing is written).
  void forward(const Inputs &inputs) const {
    check(lina_kernel_forward(handle_.get(), &inputs));
  }

  /// As forward(), returning the status instead of throwing.
  lina_status tryForward(const Inputs &inputs) const noexcept {
    return lina_kernel_forward(handle_.get(), &inputs);
  }

  /// The bytes of workspace a call of this shape needs
  /// (lina_kernel_workspace_size; numSequences is read only for varlen
  /// specs): 0 for the fused strategy.
  size_t workspaceSize(int64_t batch, int64_t seqLen,
                       int64_t numSequences = 0) const {
    size_t bytes = 0;
    check(lina_kernel_workspace_size(handle_.get(), batch, seqLen,
                                     numSequences, &bytes));
    return bytes;
  }

  /// As forward(), with the call's scratch in `workspace`, device memory of
  /// at least workspaceSize() bytes that the caller keeps allocated until
  /// the stream has run the call (lina_kernel_forward_with_workspace): calls
  /// may then overlap on several streams and be captured in CUDA graphs.
  void forward(const Inputs &inputs, void *workspace,
               size_t workspaceBytes) const {
    check(lina_kernel_forward_with_workspace(handle_.get(), &inputs,
                                             workspace, workspaceBytes));
  }

private:
  explicit Kernel(lina_kernel *handle)
      : handle_(handle, lina_kernel_destroy) {}
  std::shared_ptr<lina_kernel> handle_;
};

/// How to tune (lina_tune).
struct TuneOptions {
  lina_tune_mode mode = LINA_TUNE_FAST;
  int device = 0;
  /// Time candidates with the cost model instead of the GPU (no GPU
  /// needed; recorded under GPU "simulated", which no device matches).
  bool simulate = false;
  /// Tune the backward's kernels (LINA_TUNE_BACKWARD): the winner is what
  /// lina_backward_create_for_shape uses for the bucket.
  bool backward = false;
};

/// What a tune found (lina_tune_result).
struct TuneResult {
  /// The winner, which kernels made for the shape's bucket now use
  /// (Kernel::fromSpec with KernelOptions::batch and seqLen).
  lina_schedule schedule = {};
  double timeMs = 0;
  /// The space, those pruned before any trial, those timed now and those
  /// read back from the cache.
  int64_t candidates = 0, pruned = 0, tried = 0, recorded = 0;
  /// Whether later processes find the results; else why not.
  bool saved = false;
  std::string notSavedReason;
};

/// Finds the fastest schedule for `specText` at B = `batch` sequences of
/// `seqLen` tokens and records it in lina's cache, as `lina tune` does
/// (lina_c.h's lina_tune). Blocking: seconds to an hour. Throws lina::Error.
///
///   lina::tune(lina::presetSpec("gdn", 128, 128, 16, 16, "bf16"), 1, 8192);
///   lina::KernelOptions o;
///   o.batch = 1; o.seqLen = 8192;   // any shape of the same bucket
///   lina::Kernel gdn = lina::Kernel::fromPreset("gdn", 128, 128, 16, 16,
///                                               "bf16", o);  // the winner
inline TuneResult tune(const std::string &specText, int64_t batch,
                       int64_t seqLen, const TuneOptions &options = {}) {
  lina_tune_result r;
  int mode = options.mode | (options.backward ? LINA_TUNE_BACKWARD : 0);
  check(lina_tune(specText.c_str(), batch, seqLen, mode, options.device,
                  options.simulate ? 1 : 0, &r));
  TuneResult result;
  result.schedule = r.schedule;
  result.timeMs = r.time_ms;
  result.candidates = r.candidates;
  result.pruned = r.pruned;
  result.tried = r.tried;
  result.recorded = r.recorded;
  result.saved = r.saved != 0;
  result.notSavedReason = r.not_saved_reason;
  return result;
}

/// How to build a decode kernel; zeros let lina choose (the warp width by
/// batch size at each call).
struct DecodeOptions {
  int64_t warpColumns = 0; ///< value columns per warp: 4, 8 or 16
  int64_t warps = 0;       ///< warps per CTA, 1 to 8
  int device = 0;
};

/// Device pointers and sizes of one decode call (see lina_c.h and
/// docs/decode.md for the state pool and the slot indices).
using DecodeInputs = lina_decode_args;

/// The recurrent form for serving: 1 to 16 new tokens per sequence against
/// states kept in a pool between calls, updated in place. Each forward is
/// one launch, with no allocation or synchronisation (CUDA-graph friendly).
///
///   lina::DecodeKernel gdn = lina::DecodeKernel::fromPreset("gdn", 128, 128,
///                                                           16, 32, "bf16");
///   lina::DecodeInputs in = {};
///   in.q = q; ...; in.state = pool; in.state_indices = slots;
///   in.num_slots = slots_in_pool; in.batch = B; in.seq_len = 1;
///   gdn.forward(in);
class DecodeKernel {
public:
  static DecodeKernel fromSpec(const std::string &specText,
                               const DecodeOptions &options = {}) {
    lina_decode_schedule schedule = {options.warpColumns, options.warps};
    lina_decode_kernel *handle = nullptr;
    check(lina_decode_create(specText.c_str(), &schedule, options.device,
                             &handle));
    return DecodeKernel(handle);
  }

  static DecodeKernel fromPreset(const std::string &preset, int64_t keyDim,
                                 int64_t valueDim, int64_t heads,
                                 int64_t valueHeads, const std::string &dtype,
                                 const DecodeOptions &options = {}) {
    return fromSpec(
        presetSpec(preset, keyDim, valueDim, heads, valueHeads, dtype),
        options);
  }

  /// Checks `inputs` and launches on inputs.stream; throws lina::Error
  /// (nothing is written then).
  void forward(const DecodeInputs &inputs) const {
    check(lina_decode_forward(handle_.get(), &inputs));
  }

  lina_status tryForward(const DecodeInputs &inputs) const noexcept {
    return lina_decode_forward(handle_.get(), &inputs);
  }

  /// The value columns per warp a call with `batch` sequences uses.
  int64_t warpColumns(int64_t batch) const {
    return lina_decode_warp_columns(handle_.get(), batch);
  }

private:
  explicit DecodeKernel(lina_decode_kernel *handle)
      : handle_(handle, lina_decode_destroy) {}
  std::shared_ptr<lina_decode_kernel> handle_;
};

} // namespace lina

#endif // LINA_LINA_H
