//===- Spec.cpp - Spec validation and enum names -----------------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Spec/Spec.h"

#include <cmath>

namespace lina {

double Spec::effectiveScale() const {
  return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(keyDim));
}

int64_t Spec::gateWidth() const {
  switch (decay) {
  case DecayKind::None:
    return 0;
  case DecayKind::FixedPerHead:
  case DecayKind::Scalar:
    return 1;
  case DecayKind::PerChannel:
    return keyDim;
  }
  return 0;
}

std::vector<std::string> validate(const Spec &s) {
  std::vector<std::string> errors;
  auto positive = [&](const char *field, int64_t v) {
    if (v <= 0)
      errors.push_back(std::string(field) + " must be positive, got " +
                       std::to_string(v));
  };
  positive("key_dim", s.keyDim);
  positive("value_dim", s.valueDim);
  positive("heads", s.heads);
  positive("value_heads", s.valueHeads);
  if (s.heads > 0 && s.valueHeads > 0 && s.valueHeads % s.heads != 0)
    errors.push_back("value_heads (" + std::to_string(s.valueHeads) +
                     ") must be a multiple of heads (" +
                     std::to_string(s.heads) +
                     "): grouped value heads share each q/k head among "
                     "value_heads / heads value heads");
  constexpr int64_t kMaxDim = 1024;
  if (s.keyDim > kMaxDim || s.valueDim > kMaxDim)
    errors.push_back("key_dim and value_dim must be at most " +
                     std::to_string(kMaxDim) +
                     ": the state of one head is key_dim x value_dim fp32");
  constexpr int64_t kMaxHeads = 1 << 16;
  if (s.heads > kMaxHeads || s.valueHeads > kMaxHeads)
    errors.push_back("heads and value_heads must be at most " +
                     std::to_string(kMaxHeads));
  if (s.update == UpdateRule::Delta && s.beta == BetaSource::None)
    errors.push_back("update = delta needs beta: set beta = given, sigmoid "
                     "or two_sigmoid");
  bool dplr = s.update == UpdateRule::DPLR;
  // The write weight w_t is the dplr and additive rules' (the delta rule's
  // is beta by definition); the low-rank vectors are dplr's alone.
  bool weightedWrite =
      s.update != UpdateRule::Delta && s.write == WriteWeight::Beta;
  bool readsBeta = weightedWrite ||
                 (dplr && (s.lowRankA == LowRankSource::BetaKey ||
                           s.lowRankB == LowRankSource::BetaKey));
  if (readsBeta && s.beta == BetaSource::None)
    errors.push_back("low_rank_a/low_rank_b = beta_key and write = beta need "
                     "beta: set beta = given, sigmoid or two_sigmoid");
  if (s.update != UpdateRule::Delta && !readsBeta &&
      s.beta != BetaSource::None)
    errors.push_back(std::string("beta is only used by update = delta, write "
                                 "= beta or a dplr beta_key vector; remove it "
                                 "(update is ") +
                     toString(s.update) + ")");
  if (!dplr && (s.lowRankA != LowRankSource::Input ||
                s.lowRankB != LowRankSource::Input))
    errors.push_back(std::string("low_rank_a and low_rank_b describe the dplr "
                                 "update; remove them (update is ") +
                     toString(s.update) + ")");
  if (s.update == UpdateRule::Delta && s.write != WriteWeight::One)
    errors.push_back("write describes the dplr and additive updates; remove "
                     "it (update is delta, whose write weight is beta)");
  bool dataGate =
      s.decay == DecayKind::Scalar || s.decay == DecayKind::PerChannel;
  if (!dataGate && s.gate != GateSource::Given)
    errors.push_back(std::string("gate = ") + toString(s.gate) +
                     " computes a data-dependent gate, but decay = " +
                     toString(s.decay) +
                     "; use decay = scalar or per_channel, or gate = given");
  if (s.gate == GateSource::LowerBound &&
      !(s.gateLowerBound < 0 && std::isfinite(s.gateLowerBound)))
    errors.push_back("gate_lower_bound must be a finite negative log gate, "
                     "e.g. -5.0");
  if (s.scale && !(std::isfinite(*s.scale) && *s.scale != 0))
    errors.push_back("scale must be finite and non-zero; omit it for "
                     "key_dim^-1/2");
  return errors;
}

const char *toString(DecayKind k) {
  switch (k) {
  case DecayKind::None:
    return "none";
  case DecayKind::FixedPerHead:
    return "fixed";
  case DecayKind::Scalar:
    return "scalar";
  case DecayKind::PerChannel:
    return "per_channel";
  }
  return "?";
}
const char *toString(UpdateRule u) {
  switch (u) {
  case UpdateRule::Additive:
    return "additive";
  case UpdateRule::Delta:
    return "delta";
  case UpdateRule::DPLR:
    return "dplr";
  }
  return "?";
}
const char *toString(GateSource g) {
  switch (g) {
  case GateSource::Given:
    return "given";
  case GateSource::Softplus:
    return "softplus";
  case GateSource::LowerBound:
    return "lower_bound";
  }
  return "?";
}
const char *toString(BetaSource b) {
  switch (b) {
  case BetaSource::None:
    return "none";
  case BetaSource::Given:
    return "given";
  case BetaSource::Sigmoid:
    return "sigmoid";
  case BetaSource::TwoSigmoid:
    return "two_sigmoid";
  }
  return "?";
}
const char *toString(LowRankSource l) {
  switch (l) {
  case LowRankSource::Input:
    return "input";
  case LowRankSource::Zero:
    return "zero";
  case LowRankSource::BetaKey:
    return "beta_key";
  case LowRankSource::NegDecayedKey:
    return "neg_decayed_key";
  }
  return "?";
}
const char *toString(WriteWeight w) {
  return w == WriteWeight::Beta ? "beta" : "one";
}
const char *toString(DType d) {
  switch (d) {
  case DType::BF16:
    return "bf16";
  case DType::F16:
    return "f16";
  case DType::F32:
    return "f32";
  }
  return "?";
}

template <typename Enum, int N>
static std::optional<Enum> parseEnum(const std::string &text,
                                     const Enum (&all)[N]) {
  for (Enum e : all)
    if (text == toString(e))
      return e;
  return std::nullopt;
}

std::optional<DecayKind> parseDecayKind(const std::string &t) {
  static const DecayKind all[] = {DecayKind::None, DecayKind::FixedPerHead,
                                  DecayKind::Scalar, DecayKind::PerChannel};
  return parseEnum(t, all);
}
std::optional<UpdateRule> parseUpdateRule(const std::string &t) {
  static const UpdateRule all[] = {UpdateRule::Additive, UpdateRule::Delta,
                                   UpdateRule::DPLR};
  return parseEnum(t, all);
}
std::optional<GateSource> parseGateSource(const std::string &t) {
  static const GateSource all[] = {GateSource::Given, GateSource::Softplus,
                                   GateSource::LowerBound};
  return parseEnum(t, all);
}
std::optional<BetaSource> parseBetaSource(const std::string &t) {
  static const BetaSource all[] = {BetaSource::None, BetaSource::Given,
                                   BetaSource::Sigmoid, BetaSource::TwoSigmoid};
  return parseEnum(t, all);
}
std::optional<LowRankSource> parseLowRankSource(const std::string &t) {
  static const LowRankSource all[] = {LowRankSource::Input, LowRankSource::Zero,
                                      LowRankSource::BetaKey,
                                      LowRankSource::NegDecayedKey};
  return parseEnum(t, all);
}
std::optional<WriteWeight> parseWriteWeight(const std::string &t) {
  static const WriteWeight all[] = {WriteWeight::One, WriteWeight::Beta};
  return parseEnum(t, all);
}
std::optional<DType> parseDType(const std::string &t) {
  static const DType all[] = {DType::BF16, DType::F16, DType::F32};
  return parseEnum(t, all);
}

} // namespace lina
