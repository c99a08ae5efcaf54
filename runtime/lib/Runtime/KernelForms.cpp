//===- KernelForms.cpp - Which GPU kernels a spec can run --------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Runtime/KernelForms.h"

#include <cstdlib>
#include <cstring>

namespace lina {

bool canRunWgmmaSegments(const Spec &spec) {
  return canRunInSegments(spec) && canRunWgmmaScan(spec) &&
         spec.decay != DecayKind::PerChannel;
}

bool wgmmaScanPreparesChunks(const Spec &spec) {
  return spec.update == UpdateRule::Delta || spec.update == UpdateRule::DPLR ||
         spec.decay == DecayKind::PerChannel;
}

bool wgmmaTemplatesSetAside() {
  // Read at every call, not once: a test sets it for one case.
  const char *v = std::getenv("LINA_WGMMA_TEMPLATES");
  return v && std::strcmp(v, "off") == 0;
}

namespace {
/// Whether WgmmaDeltaScan.cuh's per-channel additive template (GLA's)
/// covers the spec: a given gate, no write weight, q and k as they come,
/// bf16, dims 128.
bool wgmmaChannelTemplateCovers(const Spec &spec) {
  return !wgmmaTemplatesSetAside() && spec.update == UpdateRule::Additive &&
         spec.decay == DecayKind::PerChannel &&
         spec.write == WriteWeight::One && spec.gate == GateSource::Given &&
         !spec.qkL2Norm && spec.dtype == DType::BF16 && spec.keyDim == 128 &&
         spec.valueDim == 128;
}

/// Whether its per-channel delta template (KDA's) covers the spec: gates
/// and betas given, bf16, dims 128.
bool wgmmaKdaTemplateCovers(const Spec &spec) {
  return !wgmmaTemplatesSetAside() && spec.update == UpdateRule::Delta &&
         spec.decay == DecayKind::PerChannel &&
         spec.gate == GateSource::Given && spec.beta == BetaSource::Given &&
         spec.dtype == DType::BF16 && spec.keyDim == 128 &&
         spec.valueDim == 128;
}
} // namespace

bool wgmmaScanIsPrinted(const Spec &spec) {
  if (spec.update == UpdateRule::Additive)
    return !wgmmaChannelTemplateCovers(spec);
  // DPLR's free a and b (or beta k, or -(exp(g) k)): printed as a
  // per-channel decay's pair (RWKV-7's), whose prepare kernel sums a scalar
  // or fixed decay's gates over the key channels alike. A b decayed by the
  // token's own per-channel gate is not: its rows would decay by the gates,
  // not by their running sum (lina-chunk folds a's into its sum).
  if (spec.update == UpdateRule::DPLR)
    return spec.decay != DecayKind::PerChannel ||
           spec.lowRankB != LowRankSource::NegDecayedKey;
  return spec.update == UpdateRule::Delta && !wgmmaKdaTemplateCovers(spec);
}

bool wgmmaScanNeedsValueTiles(const Spec &spec) {
  return spec.update == UpdateRule::DPLR && spec.keyDim == 128;
}

bool canRunInSegments(const Spec &spec) {
  return spec.update == UpdateRule::Additive &&
         spec.decay != DecayKind::None && spec.dtype != DType::F32;
}

bool canRunWgmmaScan(const Spec &spec) {
  // The additive and delta rules: the scans printed from their ops (any
  // write weight, gates and betas given or computed, bf16 or f16, dims 64
  // or 128), or a template's where one covers the spec.
  if (wgmmaScanIsPrinted(spec))
    return spec.dtype != DType::F32 &&
           (spec.keyDim == 64 || spec.keyDim == 128) &&
           (spec.valueDim == 64 || spec.valueDim == 128);
  return spec.update == UpdateRule::Additive ||
         spec.update == UpdateRule::Delta;
}

} // namespace lina
