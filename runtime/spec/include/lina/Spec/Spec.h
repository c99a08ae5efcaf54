//===- Spec.h - The recurrence a kernel computes, without MLIR ---*- C++ -*-===//
//
// Part of lina. A plain C++ description of one linear-attention recurrence:
//
//   S_t = (D_t + b_t a_t^T) S_{t-1} + w_t k_t v_t^T,   o_t = S_t^T (scale q_t)
//
// The MLIR dialect is the textual form of this struct (dialect/ converts both
// ways); the runtime, the float64 reference and the autotuner use it directly so
// they never need MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_SPEC_SPEC_H
#define LINA_SPEC_SPEC_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lina {

/// D_t, the decay applied to the state each step. Gates are in log space.
enum class DecayKind {
  None,         ///< D_t = I (linear attention, DeltaNet)
  FixedPerHead, ///< D_t = exp(g_h) I, g_h a constant per value head (RetNet)
  Scalar,       ///< D_t = exp(g_t) I, one data-dependent gate per head (Mamba-2)
  PerChannel,   ///< D_t = Diag(exp(g_t)), one gate per key channel (GLA, KDA)
};

/// The low-rank and write terms b_t a_t^T and w_t k_t v_t^T.
enum class UpdateRule {
  Additive, ///< b = a = 0, w = 1
  Delta,    ///< b = beta k, a = -(D k), w = beta: S = (I - beta k k^T) D S + beta k v^T
  DPLR,     ///< a, b free inputs, w = 1 (RWKV-7)
};

/// How the log gate g_t is obtained from its input.
enum class GateSource {
  Given,      ///< the input is the log gate itself
  Softplus,   ///< g = -exp(A_log) * softplus(x + dt_bias)       (GDN, KDA)
  LowerBound, ///< g = lower_bound * sigmoid(exp(A_log) * (x + dt_bias))
};

/// How beta_t is obtained from its input (delta rule only).
enum class BetaSource {
  None,       ///< no beta (additive and DPLR updates)
  Given,      ///< the input is beta itself
  Sigmoid,    ///< beta = sigmoid(x)
  TwoSigmoid, ///< beta = 2 sigmoid(x): allows negative eigenvalues
};

/// Where a DPLR low-rank vector comes from. Tied forms let `lina-specialize`
/// recognise a delta rule (a = -(D k), b = beta k) or a pure decay (zero).
enum class LowRankSource {
  Input,         ///< a free input tensor (RWKV-7)
  Zero,          ///< no low-rank term
  BetaKey,       ///< beta_t k_t (needs beta)
  NegDecayedKey, ///< -(exp(g_t) . k_t)
};

/// The write weight w_t of a dplr update (the delta rule always writes beta).
enum class WriteWeight {
  One,  ///< w_t = 1: k v^T (RWKV-7)
  Beta, ///< w_t = beta_t (needs beta)
};

enum class DType { BF16, F16, F32 };

struct Spec {
  std::string name = "recurrence";
  DecayKind decay = DecayKind::None;
  UpdateRule update = UpdateRule::Additive;
  GateSource gate = GateSource::Given;
  /// Only with GateSource::LowerBound; must be negative.
  double gateLowerBound = -5.0;
  BetaSource beta = BetaSource::None;
  /// DPLR only: the sources of a_t and b_t.
  LowRankSource lowRankA = LowRankSource::Input;
  LowRankSource lowRankB = LowRankSource::Input;
  WriteWeight write = WriteWeight::One;
  /// L2-normalise q and k over the key dimension inside the kernel.
  bool qkL2Norm = false;
  /// Multiplies q; unset means keyDim^-1/2.
  std::optional<double> scale;
  int64_t keyDim = 128;
  int64_t valueDim = 128;
  int64_t heads = 16;      ///< H: heads of q and k
  int64_t valueHeads = 16; ///< HV: heads of v, gates, beta, a, b; HV % H == 0
  DType dtype = DType::BF16;
  bool initialState = false;
  bool finalState = false;
  bool varlen = false;

  double effectiveScale() const;
  bool hasGate() const {
    return decay == DecayKind::Scalar || decay == DecayKind::PerChannel ||
           decay == DecayKind::FixedPerHead;
  }
  /// Number of log-gate values per (token, value head): 0, 1 or keyDim.
  int64_t gateWidth() const;
};

/// Every problem with a spec, one message each, naming the field and the fix.
/// Empty when the spec is consistent. The dialect verifier reports the same.
std::vector<std::string> validate(const Spec &spec);

const char *toString(DecayKind);
const char *toString(UpdateRule);
const char *toString(GateSource);
const char *toString(BetaSource);
const char *toString(LowRankSource);
const char *toString(WriteWeight);
const char *toString(DType);
std::optional<DecayKind> parseDecayKind(const std::string &);
std::optional<UpdateRule> parseUpdateRule(const std::string &);
std::optional<GateSource> parseGateSource(const std::string &);
std::optional<BetaSource> parseBetaSource(const std::string &);
std::optional<LowRankSource> parseLowRankSource(const std::string &);
std::optional<WriteWeight> parseWriteWeight(const std::string &);
std::optional<DType> parseDType(const std::string &);

} // namespace lina

#endif // LINA_SPEC_SPEC_H
