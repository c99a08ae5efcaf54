lina.chunked @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>):
  %q = lina.load q : !lina.tile<16x8>
  %x = lina.matmul %q, %q : !lina.tile<16x8>, !lina.tile<16x8> -> !lina.tile<99999999999x1>
  lina.yield %q : !lina.tile<16x8>
}
