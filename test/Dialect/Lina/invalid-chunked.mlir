// RUN: lina-opt %s -split-input-file -verify-diagnostics
// The tile-level program is checked against its spec and its own shapes.

// expected-error @+1 {{chunk_size must be a power of two from 1 to 256, got 24}}
lina.chunked @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(24) {
^bb0(%s: !lina.tile<8x4>):
  lina.yield %s : !lina.tile<8x4>
}

// -----

// expected-error @+1 {{body must take one argument, the state, of type '!lina.tile<8x4>'}}
lina.chunked @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<4x8>):
  lina.yield %s : !lina.tile<4x8>
}

// -----

lina.chunked @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>):
  // expected-error @+1 {{the spec has no per-token input 'beta'}}
  %b = lina.load beta : !lina.tile<16x1>
  lina.yield %s : !lina.tile<8x4>
}

// -----

lina.chunked @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>):
  // expected-error @+1 {{'q' tiles are 16x8, got 32x8}}
  %q = lina.load q : !lina.tile<32x8>
  lina.yield %s : !lina.tile<8x4>
}

// -----

lina.chunked @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>):
  // expected-error @+1 {{'o' is the output: it is stored, not loaded}}
  %o = lina.load o : !lina.tile<16x4>
  lina.yield %s : !lina.tile<8x4>
}

// -----

lina.chunked @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>):
  %v = lina.load v : !lina.tile<16x4>
  // expected-error @+1 {{only the output 'o' is stored, got 'v'}}
  lina.store v, %v : !lina.tile<16x4>
  lina.yield %s : !lina.tile<8x4>
}

// -----

lina.chunked @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>):
  %q = lina.load q : !lina.tile<16x8>
  %v = lina.load v : !lina.tile<16x4>
  %z = lina.zeros : !lina.tile<16x1>
  // expected-error @+1 {{lhs and rhs must have the same shape, got 16x8 and 16x4}}
  %p = lina.decay_product %q, %v, %z, %z inclusive : !lina.tile<16x8>, !lina.tile<16x4>, !lina.tile<16x1>, !lina.tile<16x1> -> !lina.tile<16x16>
  lina.yield %s : !lina.tile<8x4>
}

// -----

lina.chunked @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>):
  %q = lina.load q : !lina.tile<16x8>
  %z = lina.zeros : !lina.tile<16x3>
  // expected-error @+1 {{lhs_gates must have 1 or 8 columns, got 3}}
  %p = lina.decay_product %q, %q, %z, %z strict : !lina.tile<16x8>, !lina.tile<16x8>, !lina.tile<16x3>, !lina.tile<16x3> -> !lina.tile<16x16>
  lina.yield %s : !lina.tile<8x4>
}

// -----

lina.chunked @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>):
  %q = lina.load q : !lina.tile<16x8>
  // expected-error @+1 {{contraction mismatch: 4 vs 16}}
  %m = lina.matmul %s, %q : !lina.tile<8x4>, !lina.tile<16x8> -> !lina.tile<8x8>
  lina.yield %s : !lina.tile<8x4>
}

// -----

lina.chunked @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>):
  %q = lina.load q : !lina.tile<16x8>
  // expected-error @+1 {{the triangular factor must be square, got 16x8}}
  %t = lina.tri_solve %q, %q : !lina.tile<16x8>, !lina.tile<16x8>
  lina.yield %s : !lina.tile<8x4>
}

// -----

lina.chunked @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>):
  %v = lina.load v : !lina.tile<16x4>
  // expected-error @+1 {{yields '!lina.tile<16x4>', expected the state type '!lina.tile<8x4>'}}
  lina.yield %v : !lina.tile<16x4>
}

// -----

lina.chunked @c <decay = scalar, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>):
  %g = lina.load g : !lina.tile<16x1>
  // expected-error @+1 {{lower_bound is required with the lower_bound source and only there}}
  %l = lina.gate lower_bound %g : !lina.tile<16x1>
  lina.yield %s : !lina.tile<8x4>
}

// -----

lina.chunked @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>):
  // expected-error @+1 {{tile dimensions must be positive, got 0x4}}
  %z = lina.zeros : !lina.tile<0x4>
  lina.yield %s : !lina.tile<8x4>
}

// -----

// A schedule must fit the spec it runs.
// expected-error @+1 {{schedule: tile_v (12) must be a multiple of 8 dividing value_dim (16)}}
lina.chunked @c <decay = none, update = additive, key_dim = 8, value_dim = 16, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) schedule <tile_v = 12, warps = 4> {
^bb0(%s: !lina.tile<8x16>):
  lina.yield %s : !lina.tile<8x16>
}

// -----

// expected-error @+1 {{schedule: warps must be 1, 2, 4, 8 or 16, got 3}}
lina.chunked @c <decay = none, update = additive, key_dim = 8, value_dim = 16, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) schedule <tile_v = 8, warps = 3> {
^bb0(%s: !lina.tile<8x16>):
  lina.yield %s : !lina.tile<8x16>
}

// -----

// expected-error @+1 {{schedule: segments must be 1 to 16, got 32}}
lina.chunked @c <decay = none, update = additive, key_dim = 8, value_dim = 16, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) schedule <tile_v = 8, warps = 4, strategy = split, segments = 32> {
^bb0(%s: !lina.tile<8x16>):
  lina.yield %s : !lina.tile<8x16>
}

// -----

// expected-error @+2 {{invalid strategy (fused, materialize or split) specification: eager}}
// expected-error @+1 {{failed to parse Lina_ScheduleAttr parameter 'strategy'}}
lina.chunked @c <decay = none, update = additive, key_dim = 8, value_dim = 16, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) schedule <tile_v = 8, warps = 4, strategy = eager> {
^bb0(%s: !lina.tile<8x16>):
  lina.yield %s : !lina.tile<8x16>
}
