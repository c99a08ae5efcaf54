//===- Presets.cpp - The named recurrences ----------------------------===//
//
// Part of lina. Defaults follow fla's conventions for each model family; the
// aliases are fla's op names (fla.ops.simple_gla, fla.ops.gated_delta_rule,
// fla.ops.delta_rule, fla.ops.retention and generalized_delta_rule's
// dplr_delta_rule); linear_attn, gla, kda and rwkv7 are named as in fla.
//
//===----------------------------------------------------------------------===//
#include "lina/Spec/Presets.h"

namespace lina {

static Spec makeSpec(const char *name, DecayKind decay, UpdateRule update,
                     BetaSource beta, bool qkL2Norm) {
  Spec s;
  s.name = name;
  s.decay = decay;
  s.update = update;
  s.beta = beta;
  s.qkL2Norm = qkL2Norm;
  s.initialState = true;
  s.finalState = true;
  return s;
}

const std::vector<Preset> &presets() {
  using D = DecayKind;
  using U = UpdateRule;
  using B = BetaSource;
  static const std::vector<Preset> all = {
      {"linear_attn", "linear attention: no decay, additive update",
       "S_t = S_{t-1} + k_t v_t^T",
       makeSpec("linear_attn", D::None, U::Additive, B::None, false), {}},
      {"retnet", "RetNet retention: fixed decay per head",
       "S_t = gamma_h S_{t-1} + k_t v_t^T, log gamma_h given per head",
       makeSpec("retnet", D::FixedPerHead, U::Additive, B::None, false),
       {"retention"}},
      {"mamba2", "Mamba-2 / simple GLA: data-dependent scalar decay",
       "S_t = exp(g_t) S_{t-1} + k_t v_t^T",
       makeSpec("mamba2", D::Scalar, U::Additive, B::None, false),
       {"simple_gla"}},
      {"gla", "GLA: data-dependent per-channel decay",
       "S_t = Diag(exp(g_t)) S_{t-1} + k_t v_t^T",
       makeSpec("gla", D::PerChannel, U::Additive, B::None, false), {}},
      {"deltanet", "DeltaNet: delta rule, no decay",
       "S_t = (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T",
       makeSpec("deltanet", D::None, U::Delta, B::Given, true),
       {"delta_rule"}},
      {"gdn", "Gated DeltaNet: delta rule with scalar decay",
       "S_t = exp(g_t) (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T",
       makeSpec("gdn", D::Scalar, U::Delta, B::Given, true),
       {"gated_delta_rule"}},
      {"kda", "Kimi Delta Attention: delta rule with per-channel decay",
       "S_t = (I - beta_t k_t k_t^T) Diag(exp(g_t)) S_{t-1} + beta_t k_t "
       "v_t^T",
       makeSpec("kda", D::PerChannel, U::Delta, B::Given, true), {}},
      {"rwkv7", "RWKV-7: diagonal plus low rank (DPLR) transition",
       "S_t = (Diag(exp(w_t)) + b_t a_t^T) S_{t-1} + k_t v_t^T",
       makeSpec("rwkv7", D::PerChannel, U::DPLR, B::None, false),
       {"dplr_delta_rule"}},
  };
  return all;
}

std::vector<std::string> presetNames() {
  std::vector<std::string> names;
  for (const Preset &p : presets())
    names.push_back(p.name);
  return names;
}

std::optional<Preset> findPreset(const std::string &name) {
  for (const Preset &p : presets()) {
    if (name == p.name)
      return p;
    for (const char *alias : p.aliases)
      if (name == alias)
        return p;
  }
  return std::nullopt;
}

} // namespace lina
