// RUN: lina-opt %s -split-input-file -lina-chunk=chunk-size=16 -lina-chunk-backward -lina-fuse-sums -lina-schedule="tile-v=16 strategy=materialize" -lina-cut-state | FileCheck %s
// RUN: lina-opt %s -split-input-file -lina-chunk=chunk-size=16 -lina-chunk-backward -lina-fuse-sums -lina-schedule="tile-v=16 strategy=materialize" -lina-cut-state -lina-cut-state | FileCheck %s
// RUN: lina-opt %s -split-input-file -lina-chunk=chunk-size=16 -lina-chunk-backward -lina-fuse-sums -lina-schedule="tile-v=16 strategy=materialize" -lina-cut-state -lina-pack-states -lina-global-tiles | lina-translate --split-input-file --emit-cuda-backward | FileCheck %s --check-prefix=EMIT

// A backward's two scans are cut like a split chunk's scan, whatever the
// forward's strategy. The states scan (the lina.chunked, what its yield
// needs) loads the solved keys W and values U, the keys decayed to the
// chunk's end and the last row of the gate sums; the output's ops carry no
// cut. The reverse scan (the lina.chunked_backward, carrying the state's
// gradient) loads W, the intra-chunk decay product and the decayed keys and
// queries; its second solve and the gradients' ops carry none.
// CHECK-LABEL: lina.chunked @gdn
// CHECK-SAME: strategy = materialize
// CHECK: lina.cumsum %{{.*}} {lina.cut = "last_row"} : <16x1>
// CHECK: lina.tri_solve %{{.*}}, %{{.*}} {lina.cut = "stored"}
// CHECK: lina.tri_solve %{{.*}}, %{{.*}} {lina.cut = "stored"}
// CHECK: lina.decay_product {{[^{]*}} : <16x16>
// CHECK: lina.decay_rows {{.*}} {lina.cut = "stored", to_end}
// CHECK: lina.decay_rows %{{[0-9]+}}, %{{[0-9]+}} : <16x16>, <16x1>
// CHECK: lina.yield
// CHECK-LABEL: lina.chunked_backward @gdn_backward
// CHECK: lina.cumsum %{{.*}} {lina.cut = "last_row"} : <16x1>
// CHECK: lina.tri_solve %{{.*}}, %{{.*}} {lina.cut = "stored"}
// CHECK: lina.tri_solve %{{[0-9]+}}, %{{[0-9]+}} : <16x16>, <16x16>
// CHECK: lina.decay_product {{.*}} inclusive {lina.cut = "stored"}
// CHECK: lina.decay_rows {{.*}} {lina.cut = "stored", to_end}
// CHECK: lina.decay_rows {{.*}} {lina.cut = "stored"}
// CHECK-NOT: lina.cut
// CHECK: lina.yield
//
// Two chunk-parallel prepare kernels write one record a chunk; what both
// scans load (W, the decayed keys, the gate sums' last row) the first
// stores once, so the second solves nothing. The scans load the record and
// solve nothing either. The intra-chunk decay product is stored in fp32:
// the gradients kernel, which loads it too, reads it elementwise. That
// kernel loads W, U (from the states scan's share of the record: it
// computes U alike) and the decay product rather than making them again,
// and solves nothing forward; W, which only its products read, it keeps
// packed as loaded (bf16). U is recorded in bf16 too, though U - W S reads
// it elementwise (the record's size): this states scan, whose state is a
// shared-memory tile here, loads it converted to fp32.
// EMIT-LABEL: lina_backward_states_prepare(lina::Params p)
// EMIT: tri_solve_to_global
// EMIT-LABEL: lina_backward_grads_prepare(lina::Params p, lina::GradParams d)
// EMIT-NOT: tri_solve
// EMIT: store_tile<16, 16, float>((float *)(p.chunk_data + (slot * 1 + hv) * [[$RECORD:[0-9]+]]LL
// EMIT-LABEL: void lina_backward_states(
// EMIT-NOT: tri_solve
// EMIT: load_tile<16, 16, bf16>((smem + {{[0-9]+}}), (bf16 *)(p.chunk_data + (slot * 1 + hv) * [[$RECORD]]LL
// EMIT-LABEL: void lina_backward_state_grads(
// EMIT-NOT: tri_solve
// EMIT: p.chunk_data + (slot * 1 + hv) * [[$RECORD]]LL
// EMIT-LABEL: lina_chunk_backward(
// EMIT: tile_copy<16, 16, bf16>::fetch<true>(((bf16 *)(smem + {{[0-9]+}})), (bf16 *)(p.chunk_data + (slot * 1 + hv) * [[$RECORD]]LL
// EMIT: tile_copy<16, 16, float>::fetch<true>((smem + {{[0-9]+}}), (float *)(p.chunk_data + (slot * 1 + hv) * [[$RECORD]]LL
// EMIT-NOT: decay_product<16, 16, 1, true>({{.*}}, n, false)
// EMIT-NOT: tri_solve<
// EMIT: tri_solve_transposed<16, 16>
// EMIT-NOT: tri_solve<
// EMIT: LINA_KERNEL_ENTRY(lina_chunk_backward)
lina.recurrence @gdn <decay = scalar, update = delta, beta = given, qk_l2norm = true, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true>

// -----

// The additive rules' scans solve nothing: their walks are short already,
// and stay whole.
// CHECK-LABEL: lina.chunked_backward @gla_backward
// CHECK-NOT: lina.cut
// EMIT-NOT: lina_backward_{{[a-z]+}}_prepare(
// EMIT: lina_backward_scans(
lina.recurrence @gla <decay = per_channel, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true>
