// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-schedule="tile-v=32 warps=8 strategy=split prefetch=1" -lina-cut-state -lina-place-state -lina-pipeline-loads -lina-occupancy | FileCheck %s --implicit-check-not=parallel_min_ctas
// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-schedule="tile-v=32 warps=8 strategy=split prefetch=1 two-ctas=1" -lina-cut-state -lina-place-state -lina-pipeline-loads -lina-occupancy | FileCheck %s --check-prefix=TWO
// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-schedule="tile-v=128 warps=8 strategy=split prefetch=1" -lina-cut-state -lina-place-state -lina-pipeline-loads -lina-occupancy | FileCheck %s --check-prefix=ONE
// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-schedule="tile-v=32 warps=8 strategy=split prefetch=1" -lina-cut-state -lina-place-state -lina-pipeline-loads -lina-occupancy -lina-schedule="tile-v=32 warps=8 strategy=split" | FileCheck %s --check-prefix=NONE
// RUN: lina-opt %s -lina-chunk=chunk-size=64 -lina-schedule="tile-v=32 warps=8 strategy=split prefetch=1" -lina-cut-state -lina-place-state -lina-pipeline-loads -lina-occupancy | FileCheck %s --check-prefix=C64
// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-schedule="tile-v=128 warps=8 strategy=materialize prefetch=1" -lina-cut-state -lina-place-state -lina-pipeline-loads -lina-occupancy | FileCheck %s --check-prefix=MAT
// RUN: lina compile gdn --chunk-size 64 --emit mlir | sed 's/parallel_min_ctas = 1/parallel_min_ctas = 2/' \
// RUN:   | lina-translate --emit-cuda | FileCheck %s --check-prefix=EMIT-PARALLEL
// RUN: lina compile gdn --strategy fused --tile-v 64 --emit mlir | sed 's/placement <state = registers/placement <parallel_min_ctas = 1, state = registers/' \
// RUN:   | not lina-translate --emit-cuda 2>&1 | FileCheck %s --check-prefix=NO-PARALLEL
// RUN: lina compile gdn --emit mlir | sed 's/placement <state = registers, ring = 2>/placement <state = registers, ring = 2, min_ctas = 2>/' \
// RUN:   | lina-translate --emit-cuda | FileCheck %s --check-prefix=EMIT

// The CTAs an SM the scan asks ptxas to fit (its __launch_bounds__
// minimum). Mamba-2's bf16 split scan of 16-token chunks and 32 value
// columns on eight warps asks for three: 80 registers, which its loop fits
// without spills, and gla's 384 CTAs at 1x8192x96 in one wave of 132 SMs.
// CHECK-LABEL: lina.chunked @mamba2
// CHECK-SAME: placement <state = registers, ring = 3, min_ctas = 3> {
lina.recurrence @mamba2 <decay = scalar, update = additive, key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = bf16, initial_state = true, final_state = true>

// The delta rule's scan spills at 80: no minimum, ptxas picks its
// registers; with the schedule's two-ctas, two.
// CHECK-LABEL: lina.chunked @gdn
// CHECK-SAME: placement <state = registers, ring = 2> {
// TWO-LABEL: lina.chunked @gdn
// TWO-SAME: placement <state = registers, ring = 2, min_ctas = 2> {
// An f32 scan of 128 value columns has room for one CTA an SM, and says
// so, so that ptxas does not aim at an occupancy it cannot have.
// ONE-LABEL: lina.chunked @gdn_f32
// ONE-SAME: placement <ring = 1, min_ctas = 1> {
lina.recurrence @gdn <decay = scalar, update = delta, beta = given, qk_l2norm = true, key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = bf16, initial_state = true, final_state = true>
lina.recurrence @gdn_f32 <decay = scalar, update = delta, beta = given, qk_l2norm = true, key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = f32, initial_state = true, final_state = true>

// The chunk-parallel kernel beside the scan asks for one CTA an SM where
// its shared memory leaves room for one: a 64-token chunk's prepare kernel
// (its chunk-square tiles), a materialize strategy's output kernel of 128
// value columns; 16-token chunks' prepare kernels fit several and ask for
// none.
// C64-LABEL: lina.chunked @gdn
// C64-SAME: parallel_min_ctas = 1> {
// MAT-LABEL: lina.chunked @gdn
// MAT-SAME: parallel_min_ctas = 1> {

// The emitter prints the recorded minimums on the scan and on the prepare
// kernel, and refuses one recorded for a chunk-parallel kernel the
// schedule does not run.
// EMIT: __launch_bounds__(256) lina_chunk_prepare
// EMIT: __launch_bounds__(256, 2) lina_chunk_split_scan
// EMIT-PARALLEL: __launch_bounds__(256, 2) lina_chunk_prepare
// NO-PARALLEL: placement <parallel_min_ctas = 1>, but this schedule runs no generated chunk-parallel kernel (run -lina-occupancy)

// A new schedule drops the minimum chosen for the old one.
// NONE-NOT: min_ctas
