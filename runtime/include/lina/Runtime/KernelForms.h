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

/// Whether codegen's wgmma scans cover the spec: the additive and delta
/// rules, printed from the chunk's ops (WarpgroupScan.h: any write weight,
/// gates and betas given or computed, q and k normalised in the kernel or
/// not, bf16 or f16, key and value dims 64 or 128), or where a template
/// covers the spec (WgmmaDeltaScan.cuh: GLA, KDA, DeltaNet and Gated
/// DeltaNet as the presets spell them). The planner names what is missing
/// (wgmmaScanRefusal).
bool canRunWgmmaScan(const Spec &spec);

/// Whether the wgmma scan runs the spec in segments (each chunk's segment
/// record stored by the scan printed from the chunk's ops): the additive
/// rules with a decay of at most one value a token, the ones both
/// predicates above cover but GLA.
bool canRunWgmmaSegments(const Spec &spec);

/// Whether the spec's wgmma scan runs behind a kernel that prepares each
/// chunk first (the delta and DPLR rules and the per-channel decays:
/// printed, or WgmmaDeltaScan.cuh's, whose scan also runs a CTA a value
/// half) rather than as one fused kernel.
bool wgmmaScanPreparesChunks(const Spec &spec);

/// Whether the spec's wgmma kernels are printed from the chunk's ops
/// (codegen's WarpgroupScan.h: the additive, delta and DPLR rules that the
/// templates do not cover) rather than instantiated from a template (GLA
/// and KDA as the presets spell them, whose templates stay until the
/// printed kernels match them on a GPU).
bool wgmmaScanIsPrinted(const Spec &spec);

/// Whether the spec's printed wgmma scan runs only a CTA a 64-column value
/// tile: DPLR at key dim 128, whose chunk record (97 KB) leaves shared
/// memory for two stages of such a tile and no wider one.
bool wgmmaScanNeedsValueTiles(const Spec &spec);

/// Whether the Hopper templates are set aside (LINA_WGMMA_TEMPLATES=off):
/// every spec, the presets too, then runs the wgmma kernels printed from its
/// ops, so one build times the printed kernels against the templates they
/// are to replace. The switch goes when the templates do.
bool wgmmaTemplatesSetAside();

} // namespace lina

#endif // LINA_RUNTIME_KERNELFORMS_H
