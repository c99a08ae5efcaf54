// RUN: lina-opt %s -split-input-file -verify-diagnostics
// RUN: lina compile gdn --emit mlir --strategy fused --tile-v 8 --warps 4 --no-prefetch \
// RUN:   | sed 's/schedule <tile_v = 8, warps = 4>/& placement <state = registers>/' \
// RUN:   | not lina-translate --emit-cuda 2>&1 | FileCheck %s --check-prefix=EMIT
// RUN: lina compile gdn --emit mlir | sed 's/"hoisted"/"product"/' \
// RUN:   | not lina-translate --emit-cuda 2>&1 | FileCheck %s --check-prefix=USE
// RUN: lina compile gdn --emit mlir | sed 's/ {lina.state_use = "folded", transpose_lhs}/ {transpose_lhs}/' \
// RUN:   | not lina-translate --emit-cuda 2>&1 | FileCheck %s --check-prefix=UNRECORDED
// RUN: lina compile gdn --backward --emit mlir \
// RUN:   | sed '/chunked_backward/,$ s/ {lina.state_use = "folded", transpose_lhs}/ {transpose_lhs}/' \
// RUN:   | not lina-translate --emit-cuda-backward 2>&1 | FileCheck %s --check-prefix=UNRECORDED
// RUN: lina compile gdn --backward --emit mlir --chunk-size 16 --tile-v 8 --warps 4 \
// RUN:   | sed 's/schedule <tile_v = 8, warps = 4> placement <ring = 2>/schedule <tile_v = 8, warps = 4> placement <state = registers, ring = 2>/' \
// RUN:   | not lina-translate --emit-cuda-backward 2>&1 | FileCheck %s --check-prefix=EMIT

// lina-place-state's record is checked where it is read back: by the
// dialect's verifier, and by the emitter, which prints registers only where
// they can hold this kernel's state (8 value columns do not fill a 16-row
// accumulator tile, so lina-place-state would not have placed it there).
// EMIT: placement <state = registers>, but the state's uses or the value tile and warps do not allow it in this kernel (run -lina-place-state to place it)
// And each op's part in using the registers is printed as recorded or not at
// all: gdn's q S, recorded as a product of its own where its partial sums
// are hoisted into W S's call, or K^T U with its fold into the state erased.
// USE: 'lina.matmul' records lina.state_use = "product", but in this kernel it plays "hoisted" (run -lina-place-state to place the state)
// UNRECORDED: 'lina.matmul' records lina.state_use = "", but in this kernel it plays "folded"

// expected-error @+2 {{invalid state home (shared or registers) specification: elsewhere}}
// expected-error @+1 {{failed to parse Lina_PlacementAttr parameter 'state'}}
lina.chunked @gla <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> chunk_size(16) placement <state = elsewhere> {
^bb0(%s: !lina.tile<16x16>):
  lina.yield %s : <16x16>
}

// -----

// The retired string record is refused by name.
lina.chunked @gla <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> chunk_size(16) {
^bb0(%s: !lina.tile<16x16>):
  %k = lina.load k : <16x16>
  // expected-error @+1 {{unknown lina attribute 'lina.state'}}
  %n = lina.l2norm %k {lina.state = "registers"} : <16x16>
  lina.yield %s : <16x16>
}

// -----

lina.chunked @gla <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> chunk_size(16) placement <state = registers> {
^bb0(%s: !lina.tile<16x16>):
  %q = lina.load q : <16x16>
  // expected-error @+1 {{'lina.state_use' must be "product", "hoisted", "folded", "epilogue", "reduces" or "fused", got "borrowed"}}
  %o = lina.matmul %q, %s {lina.state_use = "borrowed"} : <16x16>, <16x16> -> <16x16>
  lina.yield %s : <16x16>
}

// -----

lina.chunked @gla <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> chunk_size(16) {
^bb0(%s: !lina.tile<16x16>):
  %q = lina.load q : <16x16>
  // expected-error @+1 {{'lina.state_use' belongs on an op of a lina.chunked or lina.chunked_backward whose state is in registers (placement <state = registers>)}}
  %o = lina.matmul %q, %s {lina.state_use = "product"} : <16x16>, <16x16> -> <16x16>
  lina.yield %s : <16x16>
}
