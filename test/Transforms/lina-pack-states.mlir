// RUN: lina-opt %s -split-input-file -lina-pack-states | FileCheck %s
// RUN: lina-opt %s -split-input-file -lina-pack-states -lina-pack-states | FileCheck %s
// RUN: lina-opt %s -split-input-file -lina-pack-states | lina-translate --split-input-file --emit-cuda-backward | FileCheck %s --check-prefix=EMIT
// RUN: not lina-translate %s --split-input-file --emit-cuda-backward 2>&1 | FileCheck %s --check-prefix=REFUSED

// The gradients kernel reads each chunk's starting state S and the gradient
// of its last state dS from the workspace, bf16 for a bf16 spec. Here q dS
// is a tensor-core product and S is added elementwise: dS stays packed in
// bf16 (argument 1), S becomes an fp32 tile. Planned twice, the same.
// CHECK-LABEL: lina.chunked_backward @la_backward
// CHECK-SAME: schedule <tile_v = 16, warps = 4> attributes {lina.packed_states = array<i64: 1>} {
// EMIT: lina_chunk_backward(
// EMIT: load_state<16, 16>((smem + {{[0-9]+}}), (bf16 *)p.chunk_states
// EMIT-NEXT: load_state<16, 16, false>(((bf16 *)(smem + {{[0-9]+}})), (bf16 *)d.chunk_grads
// A record the kernel cannot honour is refused, naming the pass:
// REFUSED: error: 'lina.packed_states' keeps state 0 packed in bf16, but the gradients kernel reads it as fp32 (run -lina-pack-states to choose)
module {
  lina.chunked @la <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16> chunk_size(16) schedule <tile_v = 16, warps = 4, strategy = materialize> {
  ^bb0(%s: !lina.tile<16x16>):
    %0 = lina.load q : <16x16>
    %1 = lina.load k : <16x16>
    %2 = lina.load v : <16x16>
    %3 = lina.matmul %0, %s : <16x16>, <16x16> -> <16x16>
    lina.store o, %3 : <16x16>
    %4 = lina.matmul %1, %2 {transpose_lhs} : <16x16>, <16x16> -> <16x16>
    %5 = lina.add %s, %4 : <16x16>
    lina.yield %5 : <16x16>
  }
  lina.chunked_backward @la_backward <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16> chunk_size(16) schedule <tile_v = 16, warps = 4> attributes {lina.packed_states = array<i64: 0, 1>} {
  ^bb0(%s: !lina.tile<16x16>, %ds: !lina.tile<16x16>):
    %0 = lina.load q : <16x16>
    %1 = lina.matmul %0, %ds : <16x16>, <16x16> -> <16x16>
    %2 = lina.add %s, %1 : <16x16>
    lina.accumulate q, %2 : <16x16>
    lina.yield %ds : <16x16>
  }
}

// -----

// An f16 spec's chunk states are fp32 in the workspace: neither is packed.
// Its q, loaded in f16 and read by products alone, is (lina.packed).
// CHECK-LABEL: lina.chunked_backward @f16_backward
// CHECK-NOT: lina.packed_states
// CHECK: lina.load q {lina.packed} : <16x16>
// CHECK: lina.yield
// EMIT: lina_chunk_backward(
// EMIT: load_state<16, 16>((smem + {{[0-9]+}}), p.chunk_states
// EMIT-NEXT: load_state<16, 16>((smem + {{[0-9]+}}), d.chunk_grads
// EMIT-NEXT: tile_copy<16, 16, f16>::fetch(((f16 *)(smem + {{[0-9]+}})), (const f16 *)p.q
// EMIT: }
module {
  lina.chunked @f16 <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = f16> chunk_size(16) schedule <tile_v = 16, warps = 4, strategy = materialize> {
  ^bb0(%s: !lina.tile<16x16>):
    %0 = lina.load q : <16x16>
    %1 = lina.load k : <16x16>
    %2 = lina.load v : <16x16>
    %3 = lina.matmul %0, %s : <16x16>, <16x16> -> <16x16>
    lina.store o, %3 : <16x16>
    %4 = lina.matmul %1, %2 {transpose_lhs} : <16x16>, <16x16> -> <16x16>
    %5 = lina.add %s, %4 : <16x16>
    lina.yield %5 : <16x16>
  }
  lina.chunked_backward @f16_backward <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = f16> chunk_size(16) schedule <tile_v = 16, warps = 4> {
  ^bb0(%s: !lina.tile<16x16>, %ds: !lina.tile<16x16>):
    %0 = lina.load q : <16x16>
    %1 = lina.matmul %0, %ds : <16x16>, <16x16> -> <16x16>
    %2 = lina.matmul %0, %s : <16x16>, <16x16> -> <16x16>
    %3 = lina.add %2, %1 : <16x16>
    lina.accumulate q, %3 : <16x16>
    lina.yield %ds : <16x16>
  }
}

// -----

// The 16-bit tiles the gradients kernel loads are packed where products
// alone read them: q and dL/do here, not k, which is added elementwise. A
// record's stale lina.packed (on k) is planned afresh. Packed, they are
// copied as they are (cp.async); k is converted to fp32 as it lands.
// CHECK-LABEL: lina.chunked_backward @loads_backward
// CHECK-SAME: lina.packed_states = array<i64: 0, 1>
// CHECK: lina.load q {lina.packed} : <16x16>
// CHECK-NEXT: lina.load k : <16x16>
// CHECK-NEXT: lina.load_output_grad {lina.packed} : <16x16>
// EMIT: lina_chunk_backward(
// EMIT: tile_copy<16, 16, bf16>::fetch(((bf16 *)(smem + {{[0-9]+}})), (const bf16 *)p.q
// EMIT-NEXT: tile_fetch<16, 16, bf16> [[K:fetched[0-9]+]];
// EMIT-NEXT: [[K]].fetch((const bf16 *)p.k
// EMIT-NEXT: [[K]].commit((smem + {{[0-9]+}}));
// EMIT: tile_copy<16, 16, bf16>::fetch(((bf16 *)(smem + {{[0-9]+}})), (const bf16 *)d.d_o
// EMIT: LINA_KERNEL_ENTRY(lina_chunk_backward)
module {
  lina.chunked @loads <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16> chunk_size(16) schedule <tile_v = 16, warps = 4, strategy = materialize> {
  ^bb0(%s: !lina.tile<16x16>):
    %0 = lina.load q : <16x16>
    %1 = lina.load k : <16x16>
    %2 = lina.load v : <16x16>
    %3 = lina.matmul %0, %s : <16x16>, <16x16> -> <16x16>
    lina.store o, %3 : <16x16>
    %4 = lina.matmul %1, %2 {transpose_lhs} : <16x16>, <16x16> -> <16x16>
    %5 = lina.add %s, %4 : <16x16>
    lina.yield %5 : <16x16>
  }
  lina.chunked_backward @loads_backward <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16> chunk_size(16) schedule <tile_v = 16, warps = 4> {
  ^bb0(%s: !lina.tile<16x16>, %ds: !lina.tile<16x16>):
    %0 = lina.load q : <16x16>
    %1 = lina.load k {lina.packed} : <16x16>
    %2 = lina.load_output_grad : <16x16>
    %3 = lina.transpose %s : <16x16> -> <16x16>
    %4 = lina.matmul %2, %3 : <16x16>, <16x16> -> <16x16>
    %5 = lina.add %4, %1 : <16x16>
    lina.accumulate q, %5 : <16x16>
    %6 = lina.matmul %0, %ds : <16x16>, <16x16> -> <16x16>
    lina.accumulate v, %6 : <16x16>
    lina.yield %ds : <16x16>
  }
}
