//===- KernelForms.h - Which GPU kernels a spec can run ---------*- C++ -*-===//
//
// Part of lina. Predicates on a lina::Spec that choose among the CUDA
// backend's kernels: whether a rule can run a sequence in segments, and
// whether and how the Hopper wgmma scans cover it. They describe the
// backend, not the recurrence (Spec.h), and feed defaultSchedule, the
// planner, the tuner's knobs and the cost model; the planner has the last
// word on a spec (wgmmaScanRefusal names what is missing).
//
//===----------------------------------------------------------------------===//
#ifndef LINA_RUNTIME_KERNELFORMS_H
#define LINA_RUNTIME_KERNELFORMS_H

#include "lina/Spec/Spec.h"

namespace lina {

/// Whether the spec's rule can run a sequence as segments scanned at once
/// (codegen's Segments.cuh): an additive update with a decay, bf16 or f16,
/// packed (varlen) or not. The planner has the last word: it checks the
/// chunk's ops.
bool canRunInSegments(const Spec &spec);

/// Whether codegen's wgmma scans, printed from the chunk's ops
/// (WarpgroupScan.h), cover the spec: a rule they cover
/// (wgmmaScanCoversRule) with any write weight, gates and betas given or
/// computed, q and k normalised in the kernel or not, bf16 or f16, key and
/// value dims 64 or 128. The planner names what is missing
/// (wgmmaScanRefusal).
bool canRunWgmmaScan(const Spec &spec);

/// Whether the wgmma scan runs the spec in segments (each chunk's segment
/// record stored by the scan printed from the chunk's ops): the additive
/// rules with a decay of at most one value a token, the ones both
/// predicates above cover but GLA.
bool canRunWgmmaSegments(const Spec &spec);

/// Whether the spec's wgmma scan runs behind a kernel that prepares each
/// chunk first (the delta and DPLR rules and the per-channel decays)
/// rather than as one fused kernel.
bool wgmmaScanPreparesChunks(const Spec &spec);

/// Whether the wgmma kernels printed from the chunk's ops (codegen's
/// WarpgroupScan.h) cover the spec's update rule: the additive and delta
/// rules, and DPLR but for a b decayed by the token's own per-channel gate
/// (low_rank_b = neg_decayed_key with a per-channel decay), whose rows the
/// printed prepare kernel cannot decay. canRunWgmmaScan adds the dtype and
/// the dims.
bool wgmmaScanCoversRule(const Spec &spec);

/// Whether the spec's wgmma scan runs only a CTA a 64-column value tile:
/// DPLR at key dim 128, whose chunk record (97 KB) leaves shared memory
/// for two stages of such a tile and no wider one.
bool wgmmaScanNeedsValueTiles(const Spec &spec);

} // namespace lina

#endif // LINA_RUNTIME_KERNELFORMS_H
