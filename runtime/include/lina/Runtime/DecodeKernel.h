//===- DecodeKernel.h - Launching generated decode kernels ------*- C++ -*-===//
//
// Part of lina. Decode is the serving step: a few new tokens per sequence
// (1 to 16) against a state kept between calls. A DecodePlan (CUDA source of
// the recurrent form, one kernel per warp-column width) is compiled with
// NVRTC, loaded, and run on the caller's pointers and stream. A forward call
// is one launch, with no allocation, copy or synchronisation, so it can be
// captured in a CUDA graph. docs/decode.md has the semantics.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_RUNTIME_DECODEKERNEL_H
#define LINA_RUNTIME_DECODEKERNEL_H

#include "lina/Runtime/CudaApi.h"
#include "lina/Runtime/Module.h"
#include "lina/Runtime/Nvrtc.h"
#include "lina/Runtime/Status.h"
#include "lina/Spec/Spec.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace lina {

/// The most tokens per sequence one decode call takes; longer runs are
/// prefill, for the chunk kernels.
constexpr int64_t kMaxDecodeTokens = 16;

/// The knobs of a decode kernel (the tuner's sweep space). Zero means
/// "choose by batch size at each call" (defaultDecodeSchedule).
struct DecodeSchedule {
  /// Value columns per warp: 4, 8 or 16. Each lane holds 4 columns of
  /// ceil(K / (128 / warpColumns)) key rows in registers.
  int64_t warpColumns = 0;
  /// Warps per CTA, 1 to 8: a CTA covers warps * warpColumns columns of one
  /// (sequence, value head). Warps never synchronise, so this only shapes
  /// the grid.
  int64_t warps = 0;
};

/// The warp-column widths a spec can use: 4 columns per lane, V % width == 0,
/// and at most 64 state floats per lane (K * width <= 2048).
std::vector<int64_t> decodeWarpColumnChoices(const Spec &spec);

/// Every schedule the tuner may try for `spec`: each width of
/// decodeWarpColumnChoices x 1, 2, 4 and 8 warps per CTA (all valid, all
/// computing the same result).
std::vector<DecodeSchedule> decodeScheduleSpace(const Spec &spec);

/// For a kernel whose schedule is left open: the schedule of a call of
/// `batch` sequences of `tokens` tokens (`lina tune --decode`'s result for
/// its shape bucket), or nullopt for the by-batch default. Called on every
/// call, so it must be cheap after its first call per bucket.
using DecodeScheduleChooser = std::function<std::optional<DecodeSchedule>(
    int64_t batch, int64_t tokens)>;

/// The schedule of a call of `batch` sequences where the kernel's schedule
/// and the tuner leave it open: the widest warps `available` has (dplr at
/// most 8 columns), two warps a CTA up to 2048 (sequence, value head) pairs
/// and four beyond. A zero width when `available` is empty.
DecodeSchedule defaultDecodeSchedule(const Spec &spec, int64_t batch,
                                     const std::vector<int64_t> &available);

/// The suffix of each kernel's twin for states in [V, K] order
/// (DecodeArgs::stateVFirst).
constexpr const char *kDecodeVFirstSuffix = "_vfirst";

/// Everything the launcher needs, decided by the decode planner.
struct DecodePlan {
  Spec spec; ///< after lina-specialize
  DecodeSchedule schedule;
  std::string source; ///< CUDA C++, self-contained
  /// One kernel per width in `warpColumns` (same order), each with a twin
  /// named + kDecodeVFirstSuffix.
  std::vector<int64_t> warpColumns;
  std::vector<std::string> kernelNames;
};

/// Device pointers of one decode call. Layouts are the chunk kernels'
/// (ChunkKernel.h) with T = seqLen tokens per sequence: q, k [B, T, H, K];
/// v, o [B, T, HV, V]; a, b [B, T, HV, K] in the spec's dtype; g and beta
/// fp32; gateALog [HV], gateDtBias [HV] or [HV K] fp32. The state is given
/// in one of two forms (docs/decode.md):
///
/// - pool: `state` [numSlots, HV, K, V] fp32, read and updated in place, and
///   `stateIndices`, int32 [B] (a slot per sequence) or, with
///   `indicesPerToken`, [B, T] (a slot per token, for speculative decoding,
///   with `numAcceptedTokens` int32 [B] choosing the slot read first).
///   A negative index means "no slot": start from zero, keep nothing.
/// - fla's: `initialState` [B, HV, K, V] read (null: zero) and `finalState`
///   [B, HV, K, V] written (null: not kept).
///
/// Every state is [K, V] per head, or with `stateVFirst` [V, K] (vLLM's
/// pool). With `cuSeqlens` the tokens are packed: q is [1, tokens, H, K]
/// and sequence n's tokens are [cuSeqlens[n], cuSeqlens[n + 1]); seqLen is
/// then the most tokens a sequence has and the row width of per-token
/// stateIndices. `intermediateStates` keeps the state after every token.
struct DecodeArgs {
  const void *q = nullptr, *k = nullptr, *v = nullptr;
  const float *g = nullptr, *beta = nullptr;
  const void *a = nullptr, *b = nullptr;
  const float *gateALog = nullptr, *gateDtBias = nullptr;
  void *o = nullptr;
  float *state = nullptr;
  const int32_t *stateIndices = nullptr;
  const int32_t *numAcceptedTokens = nullptr;
  int64_t numSlots = 0;
  bool indicesPerToken = false;
  const float *initialState = nullptr;
  float *finalState = nullptr;
  int64_t batch = 0, seqLen = 0;
  cuda::CUstream stream = nullptr;
  /// Packed tokens: [batch + 1] offsets, int32 (or int64 with
  /// cuSeqlensInt64). A sequence with no tokens leaves the pool alone.
  const void *cuSeqlens = nullptr;
  bool cuSeqlensInt64 = false;
  /// Every state, the pool's, fla's and the intermediate ones, is [V, K]
  /// per head instead of [K, V].
  bool stateVFirst = false;
  /// fp32 [numIntermediate, intermediateSteps, HV, K, V] (or V, K): the
  /// state after token t of sequence n goes to row r, step t, where r is
  /// intermediateIndices[n] (int32 [batch]) when given, else the sequence's
  /// slot (stateIndices [batch]), else n. A row outside [0,
  /// numIntermediate) and a step >= intermediateSteps are not kept.
  float *intermediateStates = nullptr;
  const int32_t *intermediateIndices = nullptr;
  int64_t numIntermediate = 0, intermediateSteps = 0;
  /// With the pool and stateIndices [batch]: read the slots, write none
  /// (verification that keeps its states in intermediateStates).
  bool disableStateUpdate = false;
};

/// The NVRTC options of a decode plan's source for `arch`.
cuda::CompileOptions decodeCompileOptions(const std::string &arch);

/// The plan's source compiled by NVRTC for `arch`: the cubin. No GPU needed.
Expected<std::string> compileDecodePlan(const DecodePlan &plan,
                                        const std::string &arch);

/// A compiled, loaded decode kernel for one spec and schedule.
class DecodeKernel {
public:
  /// Compiles the plan with NVRTC for device `ordinal`'s arch and loads it.
  /// (loadDecodeKernel, in the autotune library, goes through the cubin
  /// cache instead.)
  static Expected<DecodeKernel> load(const DecodePlan &plan, int ordinal = 0);

  /// Loads `cubin`, compiled from `plan.source` (compileDecodePlan).
  static Expected<DecodeKernel>
  fromCubin(const DecodePlan &plan, const std::string &cubin, int ordinal = 0);

  /// Checks `args` against the spec and launches one kernel on args.stream;
  /// nothing is written on error. No allocation and no host synchronisation.
  Status forward(const DecodeArgs &args) const;

  /// The warp-column width forward() uses for `batch` sequences of one
  /// token.
  int64_t warpColumnsFor(int64_t batch) const;

  /// The schedule forward() uses for `batch` sequences of `tokens` tokens:
  /// the plan's, else the chooser's (when it names a width this plan has),
  /// else the by-batch default (defaultDecodeSchedule).
  DecodeSchedule scheduleFor(int64_t batch, int64_t tokens) const;

  /// Where the open knobs come from (see DecodeScheduleChooser); set once,
  /// before the kernel is shared between threads.
  void setScheduleChooser(DecodeScheduleChooser chooser) {
    chooser_ = std::move(chooser);
  }

  const DecodePlan &plan() const { return plan_; }

private:
  DecodePlan plan_;
  std::shared_ptr<cuda::Module> module_;
  std::vector<cuda::Kernel> kernels_;       ///< as plan_.warpColumns
  std::vector<cuda::Kernel> vFirstKernels_; ///< their [V, K] twins
  DecodeScheduleChooser chooser_;
};

/// The argument checks of DecodeKernel::forward, without a GPU: "" when
/// `args` fit `plan`, else the message forward() would return.
std::string checkDecodeArgs(const DecodePlan &plan, const DecodeArgs &args);

} // namespace lina

#endif // LINA_RUNTIME_DECODEKERNEL_H
