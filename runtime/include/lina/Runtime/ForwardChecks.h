//===- ForwardChecks.h - What a forward call is checked for -----*- C++ -*-===//
//
// Part of lina. The checks ChunkKernel::forward makes before it launches,
// written as pure functions of the plan and the call's pointers and sizes: no
// device access, so every rejection is testable without a GPU. The value
// checks (cu_seqlens, NaN/Inf in gates) need the tensors' contents, which
// live on the device; checkInputValues() copies them to the host and is
// therefore opt-in (ForwardArgs::checkInputs or LINA_CHECK_INPUTS=1), so the
// default path never waits for the device.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_RUNTIME_FORWARDCHECKS_H
#define LINA_RUNTIME_FORWARDCHECKS_H

#include "lina/Runtime/ChunkKernel.h"
#include "lina/Runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace lina {

/// Bytes of the widest global load or store a generated kernel makes on q,
/// k, v, a, b or o. Every such pointer must be aligned to this (and to its
/// element size). Today's kernels move one element at a time, so the element
/// size is all they need. The kernel generator raises this constant (to 16
/// for 128-bit loads) in the same change that emits wider accesses; the
/// check, its message and its tests follow the constant.
inline constexpr size_t kTensorAccessBytes = 2;

/// The alignment forward() demands of a q/k/v/a/b/o pointer of \p dtype.
size_t requiredTensorAlignment(DType dtype);

/// One tensor of a call: where it is and how many bytes the kernel may touch
/// there, computed from the spec and the call's shape (tensors are
/// contiguous; the API has no strides).
struct TensorExtent {
  const char *name = "";
  const void *pointer = nullptr;
  uint64_t bytes = 0;
  bool output = false;
};

/// Every tensor the call passes (absent ones are skipped), with its extent.
/// Assumes the sizes were checked (checkForwardArgs does, before calling it).
std::vector<TensorExtent> tensorExtents(const Spec &spec,
                                        const ForwardArgs &args);

/// True when some tensor of this call, or the materialize workspace, has
/// 2^31 elements or more, so that a 32-bit element offset would wrap. The
/// emitted kernels compute global offsets in 64-bit today (KernelPlan::
/// index64); a generator that emits 32-bit offsets for speed must keep a
/// 64-bit variant for the calls this predicate selects.
bool needs64BitIndex(const KernelPlan &plan, int64_t batch, int64_t seqLen,
                     int64_t numSequences);

/// Everything forward() checks before launching, from host-visible facts:
/// required and stray pointers, alignment, batch/varlen consistency, sizes
/// that overflow, grid limits, outputs that overlap any other tensor, and a
/// 64-bit problem on a 32-bit plan. OK or InvalidArgument naming the
/// problem and the fix.
Status checkForwardArgs(const KernelPlan &plan, const ForwardArgs &args);

/// cu_seqlens as the kernel needs it: N + 1 entries starting at 0, never
/// decreasing, ending at \p seqLen.
Status checkCuSeqlensValues(const int64_t *values, int64_t count,
                            int64_t seqLen);

/// Every value finite; otherwise names the tensor and the first bad index
/// (counted from \p firstIndex, where \p values is a block of the tensor).
Status checkFiniteValues(const char *name, const float *values, int64_t count,
                         int64_t firstIndex = 0);

/// True when LINA_CHECK_INPUTS is set to anything but "" or "0" (read once).
bool inputChecksRequestedByEnvironment();

/// The value checks: copies cu_seqlens and the fp32 gate inputs (g, beta,
/// A_log, dt_bias) of the call to the host, after synchronising with
/// args.stream, and checks them. Needs the device; slow on purpose.
Status checkInputValues(const KernelPlan &plan, const ForwardArgs &args,
                        int ordinal);

} // namespace lina

#endif // LINA_RUNTIME_FORWARDCHECKS_H
