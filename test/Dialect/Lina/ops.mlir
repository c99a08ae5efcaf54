// RUN: lina-opt %s | lina-opt | FileCheck %s
// Every spec field and every tile op survives a print/parse round trip.

// CHECK: lina.recurrence @everything <decay = per_channel, update = dplr, gate = lower_bound, gate_lower_bound = -3.000000e+00 : f64, beta = two_sigmoid, low_rank_a = neg_decayed_key, low_rank_b = beta_key, write = beta, qk_l2norm = true, scale = 1.250000e-01 : f64, key_dim = 64, value_dim = 32, heads = 2, value_heads = 8, dtype = f16, initial_state = true, final_state = true, varlen = true>
lina.recurrence @everything <varlen = true, dtype = f16, decay = per_channel, update = dplr,
    gate = lower_bound, gate_lower_bound = -3.0, beta = two_sigmoid,
    low_rank_a = neg_decayed_key, low_rank_b = beta_key, write = beta,
    qk_l2norm = true, scale = 0.125, key_dim = 64, value_dim = 32, heads = 2,
    value_heads = 8, initial_state = true, final_state = true>

// CHECK-LABEL: lina.chunked @tiles
// CHECK-SAME: chunk_size(16)
lina.chunked @tiles <decay = scalar, update = delta, gate = softplus, beta = sigmoid, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>):
  // CHECK: lina.load q : <16x8>
  %q = lina.load q : !lina.tile<16x8>
  %k = lina.load k : !lina.tile<16x8>
  %v = lina.load v : !lina.tile<16x4>
  // CHECK: lina.gate softplus
  %graw = lina.load g : !lina.tile<16x1>
  %g = lina.gate softplus %graw : !lina.tile<16x1>
  // CHECK: lina.beta sigmoid
  %braw = lina.load beta : !lina.tile<16x1>
  %b = lina.beta sigmoid %braw : !lina.tile<16x1>
  // CHECK: lina.cumsum %{{.*}} {exclusive}
  %ge = lina.cumsum %g {exclusive} : !lina.tile<16x1>
  %gi = lina.cumsum %g : !lina.tile<16x1>
  %qn = lina.l2norm %q : !lina.tile<16x8>
  // CHECK: lina.scale %{{.*}} by 5.000000e-01
  %qs = lina.scale %qn by 0.5 : !lina.tile<16x8>
  %z = lina.zeros : !lina.tile<16x1>
  // CHECK: lina.decay_product {{.*}} strict
  %p = lina.decay_product %k, %k, %gi, %gi strict : !lina.tile<16x8>, !lina.tile<16x8>, !lina.tile<16x1>, !lina.tile<16x1> -> !lina.tile<16x16>
  %a = lina.scale_rows %p, %b : !lina.tile<16x16>, !lina.tile<16x1>
  %u = lina.tri_solve %a, %v : !lina.tile<16x16>, !lina.tile<16x4>
  // CHECK: lina.decay_rows {{.*}} {to_end}
  %ke = lina.decay_rows %k, %gi {to_end} : !lina.tile<16x8>, !lina.tile<16x1>
  // CHECK: lina.matmul {{.*}} {transpose_lhs}
  %kv = lina.matmul %ke, %u {transpose_lhs} : !lina.tile<16x8>, !lina.tile<16x4> -> !lina.tile<8x4>
  %sd = lina.decay_state %s, %gi : !lina.tile<8x4>, !lina.tile<16x1>
  %n = lina.add %sd, %kv : !lina.tile<8x4>
  %d = lina.sub %n, %kv : !lina.tile<8x4>
  %m = lina.neg %d : !lina.tile<8x4>
  %o = lina.matmul %qs, %m : !lina.tile<16x8>, !lina.tile<8x4> -> !lina.tile<16x4>
  lina.store o, %o : !lina.tile<16x4>
  // CHECK: lina.yield
  lina.yield %n : !lina.tile<8x4>
}

// A schedule prints only what differs from its defaults, and round-trips.
// CHECK-LABEL: lina.chunked @scheduled
// CHECK-SAME: chunk_size(16) schedule <tile_v = 32, warps = 8, strategy = split, prefetch = true, segments = 4> {
lina.chunked @scheduled <decay = scalar, update = additive, key_dim = 16, value_dim = 64, heads = 1, value_heads = 1, dtype = bf16> chunk_size(16) schedule <warps = 8, tile_v = 32, strategy = split, prefetch = true, segments = 4, mma = warp> {
^bb0(%s: !lina.tile<16x64>):
  lina.yield %s : !lina.tile<16x64>
}
