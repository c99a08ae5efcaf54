//===- DecodeSuite.h - lina-decode-suite's shared types ---------*- C++ -*-===//
//
// Part of lina. The decode kernels on a GPU against the float64 decode
// semantics (reference/DecodeReference.h). DecodeCases.cpp makes the cases,
// DecodeRun.cpp runs one, DecodeBench.cpp times them, DecodeSuite.cpp is
// the command line.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TEST_GPU_DECODESUITE_H
#define LINA_TEST_GPU_DECODESUITE_H

#include "lina/Runtime/DecodeKernel.h"
#include "lina/Runtime/Status.h"
#include "lina/Spec/Spec.h"

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace lina::decodesuite {

constexpr int kExitPass = 0;
constexpr int kExitFail = 1;
constexpr int kExitUsage = 2;
constexpr int kExitSkip = 77;

/// What a case exercises.
enum class Kind {
  Pool,    ///< slots per sequence, one negative, the rest of the pool kept
  Spec,    ///< a slot per token, num_accepted_tokens picks the start
  Fla,     ///< fla's initial_state / final_state, with and without one
  Prefill, ///< chunk kernel prefill, then decode call after call in place
  Serving, ///< the engines' layouts (ServingForm), DecodeServingRun.cpp
};

/// What a Serving case exercises (docs/decode.md, "Serving layouts").
enum class ServingForm {
  Packed,     ///< cu_seqlens, a slot per sequence, an empty sequence
  PackedSpec, ///< cu_seqlens, a row of slots per sequence, accepted counts
  Verify,     ///< [B, T], intermediate states by slot, disable_state_update
};
const char *toString(Kind kind);

struct DecodeCase {
  Kind kind = Kind::Pool;
  std::string preset;
  DType dtype = DType::BF16;
  int64_t dim = 128; ///< K = V
  int64_t batch = 1, seqLen = 1, heads = 1, valueHeads = 1;
  DecodeSchedule schedule;                   ///< zeros: the heuristic
  bool initialState = true;                  ///< Fla only
  ServingForm serving = ServingForm::Packed; ///< Serving only
  bool vFirst = false;                       ///< Serving: [V, K] states
  bool int64Offsets = false;                 ///< Serving: cu_seqlens int64
  bool quick = false;
  std::string name;
};

/// "gdn/pool/bf16/d128/B5.T4.H2.HV4/w0x0".
std::string caseName(const DecodeCase &c);
std::vector<DecodeCase> allCases();
Spec caseSpec(const DecodeCase &c);
uint64_t caseSeed(const std::string &name, uint64_t base);

struct Outcome {
  bool passed = false;
  bool compared = false;
  double outputError = std::numeric_limits<double>::infinity();
  double stateError = std::numeric_limits<double>::infinity();
  bool keptSlots = true;   ///< slots the call must not write are unchanged
  std::string message;     ///< why it did not get to compare, or extra facts
  int64_t warpColumns = 0; ///< the width the kernel chose
};

/// Plans, loads and runs one case against the reference.
Outcome runCase(const DecodeCase &c, int device, uint64_t seed);

/// A Serving case with `kernel` (DecodeServingRun.cpp).
Status runServing(const DecodeCase &c, const DecodeKernel &kernel, int device,
                  std::mt19937_64 &rng, Outcome &out);

/// --bench: lina's decode step at batch 1, 32 and 256, 32 heads, d = 128,
/// at the default schedule; with `sweep`, at every schedule of
/// decodeScheduleSpace too (the data for the by-batch default).
int runBench(int device, const std::vector<std::string> &presets, bool sweep);

} // namespace lina::decodesuite

#endif // LINA_TEST_GPU_DECODESUITE_H
