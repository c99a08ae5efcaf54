// RUN: lina-opt %s -split-input-file -lina-chunk=chunk-size=32 -lina-chunk-backward | FileCheck %s

// Linear attention: the forward stays; its backward recomputes the chunk's
// products, seeds the output's gradient from dL/do and the new state's from
// the second block argument, and gives dS0 = (Q s)^T dO + dS'.
// CHECK-LABEL: lina.chunked @linear_attn
// CHECK: lina.store o
// CHECK-LABEL: lina.chunked_backward @linear_attn_backward
// CHECK-SAME: chunk_size(32)
// CHECK-NEXT: ^bb0(%[[S0:.*]]: !lina.tile<16x8>, %[[DS:.*]]: !lina.tile<16x8>):
// CHECK: %[[Q:.*]] = lina.load q : <32x16>
// CHECK: %[[K:.*]] = lina.load k : <32x16>
// CHECK: %[[V:.*]] = lina.load v : <32x8>
// CHECK: %[[QS:.*]] = lina.scale %[[Q]] by 2.500000e-01
// CHECK: %[[Z:.*]] = lina.zeros : <32x1>
// CHECK: %[[P:.*]] = lina.decay_product %[[QS]], %[[K]], %[[Z]], %[[Z]] inclusive
// CHECK: %[[DO:.*]] = lina.load_output_grad : <32x8>
// CHECK: %[[DP:.*]] = lina.matmul %[[DO]], %{{.*}} : <32x8>, <8x32> -> <32x32>
// CHECK: %[[QDO:.*]] = lina.matmul %[[QS]], %[[DO]] {transpose_lhs}
// CHECK: %[[DS0:.*]] = lina.add %[[QDO]], %[[DS]] : <16x8>
// CHECK: lina.decay_product_grad lhs %[[DP]], %[[K]], %[[Z]], %[[Z]] inclusive
// CHECK: lina.decay_product_grad rhs %[[DP]], %[[QS]], %[[Z]], %[[Z]] inclusive
// CHECK: %[[DQ:.*]] = lina.scale %{{.*}} by 2.500000e-01
// CHECK-DAG: lina.accumulate v, %{{.*}} : <32x8>
// CHECK-DAG: lina.accumulate k, %{{.*}} : <32x16>
// CHECK-DAG: lina.accumulate q, %[[DQ]] : <32x16>
// No gradient flows into the zero gates of a form without decay.
// CHECK-NOT: reverse_cumsum
// CHECK: lina.yield %[[DS0]] : <16x8>
lina.recurrence @linear_attn <decay = none, update = additive, key_dim = 16, value_dim = 8, heads = 1, value_heads = 1, dtype = bf16>

// -----

// A computed per-channel gate: the gate's gradient runs back through the
// cumulative sum (a reverse one) to the pre-activation and the two
// parameters of the value head. Decaying the keys to the chunk's end holds
// g_t for the rows before t: that part is an exclusive cumulative sum of its
// own, added after the reverse one.
// CHECK-LABEL: lina.chunked_backward @gla_backward
// CHECK: %[[X:.*]] = lina.load g : <32x16>
// CHECK: %[[G:.*]] = lina.gate softplus %[[X]]
// CHECK: %[[TOEND:.*]] = lina.cumsum %{{.*}} {exclusive} : <32x16>
// CHECK: %[[REV:.*]] = lina.reverse_cumsum %{{.*}} : <32x16>
// CHECK: %[[DG:.*]] = lina.add %[[TOEND]], %[[REV]] : <32x16>
// CHECK: %[[DX:.*]] = lina.gate_grad input softplus %[[X]], %[[DG]]
// CHECK: %[[DA:.*]] = lina.gate_grad a_log softplus %[[X]], %[[DG]]
// CHECK: lina.accumulate gate_a_log, %[[DA]]
// CHECK: %[[DB:.*]] = lina.gate_grad dt_bias softplus %[[X]], %[[DG]]
// CHECK: lina.accumulate gate_dt_bias, %[[DB]]
// CHECK: lina.accumulate g, %[[DX]]
lina.recurrence @gla <decay = per_channel, update = additive, gate = softplus, key_dim = 16, value_dim = 8, heads = 1, value_heads = 1, dtype = bf16>

// -----

// The delta rule: the UT transform's solves have transposed solves as
// adjoints, and the factor's gradient is kept strictly lower.
// CHECK-LABEL: lina.chunked_backward @deltanet_backward
// CHECK: %[[A:.*]] = lina.scale_rows %{{.*}}, %{{.*}} : <32x32>, <32x1>
// CHECK: lina.tri_solve_transposed %[[A]], %{{.*}} : <32x32>, <32x8>
// CHECK: lina.strict_lower
// CHECK: lina.tri_solve_transposed %[[A]], %{{.*}} : <32x32>, <32x16>
// CHECK: lina.accumulate beta
lina.recurrence @deltanet <decay = none, update = delta, beta = given, qk_l2norm = true, key_dim = 16, value_dim = 8, heads = 1, value_heads = 1, dtype = bf16>

// -----

// One gate column decaying both factors of a product: P_ij holds g_t for
// i >= t > j, so the gate's gradient from P is lina.straddle_sum of dP . P
// (each pair once), not row sums at G_i less column sums at G_j, whose
// near-diagonal terms would cancel only to their rounding. The state's
// decay still reaches g through G_last and the reverse cumulative sum.
// CHECK-LABEL: lina.chunked_backward @mamba2_backward
// CHECK: %[[G:.*]] = lina.cumsum %{{.*}} : <32x1>
// CHECK: %[[P:.*]] = lina.decay_product %{{.*}}, %{{.*}}, %[[G]], %[[G]] inclusive
// CHECK: %[[DP:.*]] = lina.matmul %{{.*}}, %{{.*}} : <32x8>, <8x32> -> <32x32>
// CHECK: %[[TOEND:.*]] = lina.cumsum %{{.*}} {exclusive} : <32x1>
// CHECK: %[[LAST:.*]] = lina.add_to_last_row
// CHECK: %[[M:.*]] = lina.mul %[[DP]], %[[P]] : <32x32>
// CHECK: %[[PAIRS:.*]] = lina.straddle_sum %[[M]] : <32x32> -> <32x1>
// CHECK: %[[SUMS:.*]] = lina.add %[[TOEND]], %[[PAIRS]] : <32x1>
// CHECK: %[[REV:.*]] = lina.reverse_cumsum %{{.*}} : <32x1>
// CHECK: %[[DG:.*]] = lina.add %[[SUMS]], %[[REV]] : <32x1>
// CHECK: lina.accumulate g, %[[DG]] : <32x1>
lina.recurrence @mamba2 <decay = scalar, update = additive, key_dim = 16, value_dim = 8, heads = 1, value_heads = 1, dtype = bf16>
