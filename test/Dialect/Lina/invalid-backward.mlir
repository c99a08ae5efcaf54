// RUN: lina-opt %s -split-input-file -verify-diagnostics
// lina.chunked_backward and the backward's tile ops are checked against the
// spec and their shapes, like the forward's.

// expected-error @+1 {{body must take two arguments of type '!lina.tile<8x4>': the state before the chunk and the gradient of the state after it}}
lina.chunked_backward @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>):
  lina.yield %s : !lina.tile<8x4>
}

// -----

lina.chunked_backward @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>, %ds: !lina.tile<8x4>):
  // expected-error @+1 {{the gradient of 'o' is 16x4, got 16x8}}
  %d = lina.load_output_grad : <16x8>
  lina.yield %ds : !lina.tile<8x4>
}

// -----

lina.chunked_backward @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>, %ds: !lina.tile<8x4>):
  %z = lina.zeros : <16x1>
  // expected-error @+1 {{the spec has no input 'beta'}}
  lina.accumulate beta, %z : <16x1>
  lina.yield %ds : !lina.tile<8x4>
}

// -----

lina.chunked_backward @c <decay = scalar, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>, %ds: !lina.tile<8x4>):
  %z = lina.zeros : <16x1>
  // expected-error @+1 {{the spec computes no gate: it has no 'gate_a_log'}}
  lina.accumulate gate_a_log, %z : <16x1>
  lina.yield %ds : !lina.tile<8x4>
}

// -----

lina.chunked_backward @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>, %ds: !lina.tile<8x4>):
  %x = lina.zeros : <16x8>
  %g = lina.zeros : <16x1>
  %dp = lina.zeros : <16x8>
  // expected-error @+1 {{grad must be 16x16, got 16x8}}
  %r = lina.decay_product_grad lhs %dp, %x, %g, %g inclusive : <16x8>, <16x8>, <16x1>, <16x1> -> <16x8>
  lina.yield %ds : !lina.tile<8x4>
}

// -----

// expected-error @+1 {{body must end with lina.yield of the gradient of the state before the chunk, of type '!lina.tile<8x4>'}}
lina.chunked_backward @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>, %ds: !lina.tile<8x4>):
  %z = lina.zeros : <16x4>
  lina.yield %z : !lina.tile<16x4>
}

// -----

lina.chunked_backward @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>, %ds: !lina.tile<8x4>):
  %x = lina.zeros : <16x8>
  // expected-error @+1 {{result must be 16x1, got 16x8}}
  %r = lina.row_dot %x, %x : <16x8> -> <16x8>
  lina.yield %ds : !lina.tile<8x4>
}

// -----

lina.chunked_backward @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>, %ds: !lina.tile<8x4>):
  %x = lina.zeros : <16x8>
  // expected-error @+1 {{input must be square, got 16x8}}
  %r = lina.straddle_sum %x : <16x8> -> <16x1>
  lina.yield %ds : !lina.tile<8x4>
}

// -----

lina.chunked_backward @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>, %ds: !lina.tile<8x4>):
  %x = lina.zeros : <16x16>
  // expected-error @+1 {{result must be 16x1, got 1x16}}
  %r = lina.straddle_sum %x : <16x16> -> <1x16>
  lina.yield %ds : !lina.tile<8x4>
}

// -----

lina.chunked_backward @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>, %ds: !lina.tile<8x4>):
  // expected-error @+1 {{needs at least two terms and three tiles, or two subtracted (two tiles are an add, a sub or a mul)}}
  %r = lina.sum %s, %ds : <8x4>
  lina.yield %r : !lina.tile<8x4>
}

// -----

lina.chunked_backward @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>, %ds: !lina.tile<8x4>):
  // One subtracted tile is a neg.
  // expected-error @+1 {{needs at least two terms}}
  %r = "lina.sum"(%s) {operandSegmentSizes = array<i32: 0, 1>} : (!lina.tile<8x4>) -> !lina.tile<8x4>
  lina.yield %r : !lina.tile<8x4>
}


// -----

lina.chunked_backward @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>, %ds: !lina.tile<8x4>):
  // expected-error @+1 {{needs at least two terms and three tiles}}
  %r = lina.sum %s * %ds : <8x4>
  lina.yield %r : !lina.tile<8x4>
}

// -----

lina.chunked_backward @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>, %ds: !lina.tile<8x4>):
  // expected-error @+1 {{a term has 1 or 2 factors, got 3}}
  %r = "lina.sum"(%s, %ds, %s, %ds) {factors = array<i64: 3, 1>, operandSegmentSizes = array<i32: 4, 0>} : (!lina.tile<8x4>, !lina.tile<8x4>, !lina.tile<8x4>, !lina.tile<8x4>) -> !lina.tile<8x4>
  lina.yield %r : !lina.tile<8x4>
}

// -----

lina.chunked_backward @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>, %ds: !lina.tile<8x4>):
  // expected-error @+1 {{a product term mixes added and subtracted tiles}}
  %r = "lina.sum"(%s, %ds, %s) {factors = array<i64: 1, 2>, operandSegmentSizes = array<i32: 2, 1>} : (!lina.tile<8x4>, !lina.tile<8x4>, !lina.tile<8x4>) -> !lina.tile<8x4>
  lina.yield %r : !lina.tile<8x4>
}

// -----

lina.chunked_backward @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>, %ds: !lina.tile<8x4>):
  // expected-error @+1 {{factors name 4 tiles, but 3 are given}}
  %r = "lina.sum"(%s, %ds, %s) {factors = array<i64: 2, 2>, operandSegmentSizes = array<i32: 2, 1>} : (!lina.tile<8x4>, !lina.tile<8x4>, !lina.tile<8x4>) -> !lina.tile<8x4>
  lina.yield %r : !lina.tile<8x4>
}

// -----

// lina-global-tiles' record names the backward's kernels that keep the tile
// in global memory.
lina.chunked_backward @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>, %ds: !lina.tile<8x4>):
  // expected-error @+1 {{'lina.in_global' must name the kernels that keep the tile in global memory, "scan" and/or "chunks" once each, got ["states"]}}
  %k = lina.load k {lina.in_global = ["states"]} : <16x8>
  lina.yield %ds : !lina.tile<8x4>
}

// -----

lina.chunked_backward @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>, %ds: !lina.tile<8x4>):
  // expected-error @+1 {{'lina.in_global' must name the kernels that keep the tile in global memory, "scan" and/or "chunks" once each, got ["chunks", "chunks"]}}
  %k = lina.load k {lina.in_global = ["chunks", "chunks"]} : <16x8>
  lina.yield %ds : !lina.tile<8x4>
}

// -----

lina.chunked_backward @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>, %ds: !lina.tile<8x4>):
  // expected-error @+1 {{'lina.in_global' must name the kernels that keep the tile in global memory, "scan" and/or "chunks" once each, got []}}
  %k = lina.load k {lina.in_global = []} : <16x8>
  lina.yield %ds : !lina.tile<8x4>
}

// -----

lina.chunked @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = f32> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>):
  // expected-error @+1 {{'lina.in_global' belongs on an op of a lina.chunked_backward body that makes one tile}}
  %k = lina.load k {lina.in_global = ["chunks"]} : <16x8>
  lina.yield %s : !lina.tile<8x4>
}

// -----

// lina-pack-states' record names the chunk's states kept packed: 0 (the
// state) and/or 1 (its gradient), in order.
// expected-error @+1 {{'lina.packed_states' must name the chunk's states kept packed, 0 (the state) and/or 1 (its gradient) in order, got array<i64: 1, 0>}}
lina.chunked_backward @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = bf16> chunk_size(16) attributes {lina.packed_states = array<i64: 1, 0>} {
^bb0(%s: !lina.tile<8x4>, %ds: !lina.tile<8x4>):
  lina.yield %ds : !lina.tile<8x4>
}

// -----

lina.chunked_backward @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = bf16> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>, %ds: !lina.tile<8x4>):
  // expected-error @+1 {{'lina.packed_states' belongs on a lina.chunked_backward}}
  %x = lina.zeros {lina.packed_states = array<i64: 0>} : <8x4>
  lina.yield %ds : !lina.tile<8x4>
}

// -----

// lina-pack-states' record of a loaded tile kept packed is a unit attribute
// on an op of a lina.chunked_backward that makes one tile.
lina.chunked_backward @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = bf16> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>, %ds: !lina.tile<8x4>):
  // expected-error @+1 {{'lina.packed' is a unit attribute, got 1 : i64}}
  %x = lina.zeros {lina.packed = 1 : i64} : <8x4>
  lina.yield %ds : !lina.tile<8x4>
}

// -----

lina.chunked @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = bf16> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>):
  // expected-error @+1 {{'lina.packed' belongs on an op of a lina.chunked_backward body that makes one tile}}
  %x = lina.zeros {lina.packed} : <8x4>
  lina.yield %s : !lina.tile<8x4>
}

// -----

// lina-group-barriers' record is a barrier interval's index, on an op of a
// lina.chunked_backward.
lina.chunked_backward @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = bf16> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>, %ds: !lina.tile<8x4>):
  // expected-error @+1 {{'lina.interval' must be a barrier interval's index, an i64 of 0 or more, got -1 : i64}}
  %x = lina.zeros {lina.interval = -1 : i64} : <8x4>
  lina.yield %ds : !lina.tile<8x4>
}

// -----

lina.chunked @c <decay = none, update = additive, key_dim = 8, value_dim = 4, heads = 1, value_heads = 1, dtype = bf16> chunk_size(16) {
^bb0(%s: !lina.tile<8x4>):
  // expected-error @+1 {{'lina.interval' belongs on an op of a lina.chunked_backward body}}
  %x = lina.zeros {lina.interval = 0 : i64} : <8x4>
  lina.yield %s : !lina.tile<8x4>
}
