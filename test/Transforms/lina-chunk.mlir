// RUN: lina-opt %s -split-input-file -lina-chunk=chunk-size=32 | FileCheck %s
// RUN: not lina-opt %s -lina-chunk=chunk-size=48 2>&1 | FileCheck %s --check-prefix=BADSIZE
// BADSIZE: chunk-size must be 16, 32, 64 or 128, got 48

// Additive, no decay: zero gates, no decay ops; output from the old state.
// CHECK-LABEL: lina.chunked @linear_attn
// CHECK-SAME: chunk_size(32)
// CHECK-NEXT: ^bb0(%[[S0:.*]]: !lina.tile<16x8>):
// CHECK: %[[Q:.*]] = lina.load q : <32x16>
// CHECK: %[[K:.*]] = lina.load k : <32x16>
// CHECK: %[[V:.*]] = lina.load v : <32x8>
// CHECK: %[[QS:.*]] = lina.scale %[[Q]] by 2.500000e-01
// CHECK: %[[Z:.*]] = lina.zeros : <32x1>
// CHECK: %[[P:.*]] = lina.decay_product %[[QS]], %[[K]], %[[Z]], %[[Z]] inclusive
// CHECK: %[[KV:.*]] = lina.matmul %[[K]], %[[V]] {transpose_lhs}
// CHECK: %[[NEW:.*]] = lina.add %[[S0]], %[[KV]]
// CHECK: %[[INTER:.*]] = lina.matmul %[[QS]], %[[S0]]
// CHECK: %[[INTRA:.*]] = lina.matmul %[[P]], %[[V]]
// CHECK: %[[O:.*]] = lina.add %[[INTER]], %[[INTRA]]
// CHECK: lina.store o, %[[O]]
// CHECK: lina.yield %[[NEW]]
// CHECK-NOT: decay_rows
lina.recurrence @linear_attn <decay = none, update = additive, key_dim = 16, value_dim = 8, heads = 1, value_heads = 1, dtype = bf16>

// -----

// Gated delta rule with computed gate and beta: cumulative gates, the UT
// transform (two triangular solves with one factor), N = U - W S0.
// CHECK-LABEL: lina.chunked @gdn
// CHECK-NEXT: ^bb0(%[[S0:.*]]: !lina.tile<16x8>):
// CHECK: %[[K:.*]] = lina.load k
// CHECK: %[[KN:.*]] = lina.l2norm %[[K]]
// CHECK: %[[GRAW:.*]] = lina.load g : <32x1>
// CHECK: %[[G:.*]] = lina.gate softplus %[[GRAW]]
// CHECK: %[[GC:.*]] = lina.cumsum %[[G]] : <32x1>
// CHECK: %[[BRAW:.*]] = lina.load beta
// CHECK: %[[B:.*]] = lina.beta sigmoid %[[BRAW]]
// CHECK: %[[PKK:.*]] = lina.decay_product %[[KN]], %[[KN]], %[[GC]], %[[GC]] strict
// CHECK: %[[A:.*]] = lina.scale_rows %[[PKK]], %[[B]]
// CHECK: %[[W:.*]] = lina.tri_solve %[[A]],
// CHECK: %[[U:.*]] = lina.tri_solve %[[A]],
// CHECK: %[[WS:.*]] = lina.matmul %[[W]], %[[S0]]
// CHECK: %[[N:.*]] = lina.sub %[[U]], %[[WS]]
// CHECK: lina.decay_state %[[S0]], %[[GC]]
// CHECK: lina.matmul %{{.*}}, %[[S0]]
// CHECK: lina.store o
lina.recurrence @gdn <decay = scalar, update = delta, gate = softplus, beta = sigmoid, qk_l2norm = true, key_dim = 16, value_dim = 8, heads = 1, value_heads = 1, dtype = bf16>

// -----

// GLA: per-channel gates, 32x16 cumulative log gates.
// CHECK-LABEL: lina.chunked @gla
// CHECK: %[[G:.*]] = lina.load g : <32x16>
// CHECK: %[[GC:.*]] = lina.cumsum %[[G]] : <32x16>
// CHECK: lina.decay_product {{.*}} inclusive : <32x16>, <32x16>, <32x16>, <32x16> -> <32x32>
// CHECK: lina.decay_state %{{.*}}, %[[GC]] : <16x8>, <32x16>
// CHECK: lina.decay_rows %{{.*}}, %[[GC]] {to_end}
// CHECK: lina.decay_rows %{{.*}}, %[[GC]] : <32x16>, <32x16>
lina.recurrence @gla <decay = per_channel, update = additive, key_dim = 16, value_dim = 8, heads = 1, value_heads = 1, dtype = bf16>

// -----

// DPLR: four products, the exclusive gates for a (a_i reads S_{i-1}).
// CHECK-LABEL: lina.chunked @rwkv7
// CHECK: %[[A:.*]] = lina.load a
// CHECK: %[[B:.*]] = lina.load b
// CHECK: %[[GX:.*]] = lina.cumsum %{{.*}} {exclusive}
// CHECK: %[[LAB:.*]] = lina.decay_product %[[A]], %[[B]], %[[GX]], %{{.*}} strict
// CHECK: %[[L:.*]] = lina.neg %[[LAB]]
// CHECK: lina.tri_solve %[[L]]
// CHECK: lina.decay_product %[[A]], %{{.*}}, %[[GX]], %{{.*}} strict
// CHECK: lina.decay_product %{{.*}}, %[[B]], {{.*}} inclusive
// CHECK: lina.store o
lina.recurrence @rwkv7 <decay = per_channel, update = dplr, key_dim = 16, value_dim = 8, heads = 1, value_heads = 1, dtype = bf16>
