// RUN: lina-opt %s -lina-chunk-backward -verify-diagnostics
// An op with no adjoint rule stops the pass with an error on that op: no
// gradient is ever silently dropped.

lina.chunked @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>):
  %q = lina.load q : <16x8>
  // expected-error @+1 {{lina-chunk-backward has no adjoint for this op}}
  %m = lina.mul %q, %q : <16x8>
  %o = lina.matmul %m, %s : <16x8>, <8x4> -> <16x4>
  lina.store o, %o : <16x4>
  lina.yield %s : !lina.tile<8x4>
}
