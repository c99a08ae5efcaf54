//===- KernelForms.cpp - Which GPU kernels a spec can run --------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Runtime/KernelForms.h"

namespace lina {

bool canRunWgmmaSegments(const Spec &spec) {
  return canRunInSegments(spec) && canRunWgmmaScan(spec) &&
         spec.decay != DecayKind::PerChannel;
}

bool wgmmaScanPreparesChunks(const Spec &spec) {
  return spec.update == UpdateRule::Delta || spec.update == UpdateRule::DPLR ||
         spec.decay == DecayKind::PerChannel;
}

bool wgmmaScanCoversRule(const Spec &spec) {
  // DPLR's free a and b (or beta k, or -(exp(g) k)): printed as a
  // per-channel decay's pair (RWKV-7's), whose prepare kernel sums a scalar
  // or fixed decay's gates over the key channels alike. A b decayed by the
  // token's own per-channel gate is not: its rows would decay by the gates,
  // not by their running sum (lina-chunk folds a's into its sum).
  if (spec.update == UpdateRule::DPLR)
    return spec.decay != DecayKind::PerChannel ||
           spec.lowRankB != LowRankSource::NegDecayedKey;
  return spec.update == UpdateRule::Additive ||
         spec.update == UpdateRule::Delta;
}

bool wgmmaScanNeedsValueTiles(const Spec &spec) {
  return spec.update == UpdateRule::DPLR && spec.keyDim == 128;
}

bool canRunInSegments(const Spec &spec) {
  return spec.update == UpdateRule::Additive &&
         spec.decay != DecayKind::None && spec.dtype != DType::F32;
}

bool canRunWgmmaScan(const Spec &spec) {
  // The kernels printed from the chunk's ops (any write weight, gates and
  // betas given or computed, bf16 or f16, dims 64 or 128).
  return wgmmaScanCoversRule(spec) && spec.dtype != DType::F32 &&
         (spec.keyDim == 64 || spec.keyDim == 128) &&
         (spec.valueDim == 64 || spec.valueDim == 128);
}

} // namespace lina
