// RUN: lina-opt %s -split-input-file -verify-diagnostics
// RUN: not lina-opt %lina_src/examples/catalog/gdn_d64.mlir -lina-choose-schedule="sequences=-1" 2>&1 | FileCheck %s --check-prefix=NEGATIVE

// RUN: echo 'lina.recurrence @odd <decay = scalar, update = additive, key_dim = 24, value_dim = 32, heads = 1, value_heads = 1, dtype = bf16> chunk_size(16) schedule <tile_v = 32, warps = 8>' \
// RUN:   | not lina-opt -lina-chunk -lina-schedule 2>&1 | FileCheck %s --check-prefix=KEPT

// NEGATIVE: lina-choose-schedule: sequences, sm-count and seq-len must not be negative (0: unknown)
// A recorded schedule that lina-schedule keeps meets the tensor-core tiles
// as one of its options would.
// KEPT: lina-schedule: key_dim (24) must be a multiple of 16 for tensor-core tiles

// A chunk size is recorded with the schedule chosen for it, never alone.
// expected-error @+1 {{chunk_size and schedule are recorded together}}
lina.recurrence @gdn <decay = scalar, update = delta, beta = given, key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = bf16> chunk_size(16)

// -----

// expected-error @+1 {{chunk_size and schedule are recorded together}}
lina.recurrence @gdn <decay = scalar, update = delta, beta = given, key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = bf16> schedule <tile_v = 32, warps = 8>

// -----

// expected-error @+1 {{chunk_size must be 16, 32, 64 or 128, got 48}}
lina.recurrence @gdn <decay = scalar, update = delta, beta = given, key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = bf16> chunk_size(48) schedule <tile_v = 32, warps = 8>

// -----

// The schedule is checked against the spec as on lina.chunked.
// expected-error @+1 {{schedule: tile_v (48) must be a multiple of 8 dividing value_dim (128)}}
lina.recurrence @gdn <decay = scalar, update = delta, beta = given, key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = bf16> chunk_size(16) schedule <tile_v = 48, warps = 8>
