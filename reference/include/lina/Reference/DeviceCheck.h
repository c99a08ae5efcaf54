//===- DeviceCheck.h - A generated kernel against the reference -*- C++ -*-===//
//
// Part of lina. What every GPU check needs: inputs rounded to exactly what the
// device reads (so the float64 reference sees the same numbers), uploaded;
// outputs poisoned with NaN between guard bands; one launch; the results
// decoded back to float64. Used by lina-gpu-suite and `lina run --device gpu`.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_REFERENCE_DEVICECHECK_H
#define LINA_REFERENCE_DEVICECHECK_H

#include "lina/Reference/DecodeServing.h"
#include "lina/Reference/Problem.h"
#include "lina/Reference/Backward.h"
#include "lina/Runtime/BackwardKernel.h"
#include "lina/Runtime/ChunkKernel.h"
#include "lina/Runtime/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace lina::reference {

/// Relative error allowed for output and final state. Inputs are rounded to
/// the dtype before the reference sees them, so what is left is the kernel's
/// own arithmetic: fp32 accumulation, and for 16-bit dtypes the rounding of
/// intermediates fed to tensor cores and of the stored output. Never loosen
/// these to make a case pass; find out why it fails.
inline double tolerance(DType dtype) { return dtype == DType::F32 ? 1e-3 : 2e-2; }

size_t elementBytes(DType dtype);

/// bf16 / IEEE half conversions with round-to-nearest-even.
uint16_t floatToBf16(float value);
float bf16ToFloat(uint16_t half);
uint16_t floatToHalf(float value);
float halfToFloat(uint16_t half);
/// Checks the conversions on known values; false with a reason otherwise.
bool conversionsAreExact(std::string &why);

/// A quiet NaN in `dtype`, little-endian.
std::vector<uint8_t> nanPattern(DType dtype);
/// Encodes `values` in `dtype` and replaces each by the value it encodes to.
std::vector<uint8_t> encodeInPlace(std::vector<double> &values, DType dtype);
std::vector<double> decode(const uint8_t *bytes, size_t count, DType dtype);

/// The bytes the kernel reads, in the layouts of ForwardArgs.
struct HostInputs {
  std::vector<uint8_t> q, k, v, a, b;
  std::vector<float> g, beta, gateALog, gateDtBias, initialState;
  std::vector<int64_t> cuSeqlens;
};

/// Rounds `p` in place to what the device gets (q, k, v, a, b in the spec's
/// dtype, everything else fp32) and returns those bytes.
HostInputs encodeProblem(Problem &p);

/// encodeProblem for each sequence of a packed decode call
/// (DecodeServing.h): the bytes of the [1, tokens, ...] inputs, sequence
/// after sequence, with cuSeqlens their offsets.
HostInputs encodeServingCall(ServingCall &call);

struct DeviceRun {
  std::vector<double> o, finalState;
  double milliseconds = 0; ///< forward + synchronize, host clock
  /// With timedRepeats > 0: the median of that many calls, CUDA events.
  double medianMilliseconds = 0;
};

/// Uploads, poisons the outputs, launches once, waits and downloads. A write
/// outside an output is reported as an error. With `timedRepeats` > 0 the
/// kernel is then timed that many times. With `misalignInputs`, q, k, v, a,
/// b and the output o start one element past a 16-byte boundary (still
/// element-aligned, as forward() demands), as a tensor sliced from a larger
/// one can: the kernels must take the element-by-element path for them.
Expected<DeviceRun> runOnDevice(const ChunkKernel &kernel, const Problem &p,
                                const HostInputs &inputs, int device,
                                int timedRepeats = 0,
                                bool misalignInputs = false);

/// A device run against the float64 recurrence on the same (rounded) inputs.
struct Comparison {
  double outputError = 0, stateError = 0; ///< relative; inf for NaN/Inf
  /// stateError stays 0 for a spec without a final state.
  bool passed = false; ///< both within tolerance(p.spec.dtype)
  /// The float64 reference itself is not finite: the recurrence diverges on
  /// these inputs, so no error can be measured (never a pass).
  bool referenceOverflowed = false;
};
Comparison compareWithReference(const Problem &p, const DeviceRun &run);

/// A backward's device run: the gradients decoded to float64, in the
/// layouts of Gradients (those the spec has no input for stay empty).
struct DeviceBackwardRun {
  Gradients gradients;
  /// With timedRepeats > 0: the median of that many backward calls.
  double medianMilliseconds = 0;
};

/// Uploads `inputs` (encodeProblem's) and the output gradients `dO` [B, T,
/// HV, V] (rounded to the dtype in place, as the device reads them) and
/// `dFinalState` (empty: none), poisons every gradient buffer, runs the
/// backward once, waits and downloads. A write outside a gradient is an
/// error. With `timedRepeats` > 0 the backward is then timed.
Expected<DeviceBackwardRun>
runBackwardOnDevice(const BackwardKernel &kernel, const Problem &p,
                    const HostInputs &inputs, std::vector<double> &dO,
                    const std::vector<double> &dFinalState, int device,
                    int timedRepeats = 0);

} // namespace lina::reference

#endif // LINA_REFERENCE_DEVICECHECK_H
