// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-schedule="tile-v=32 warps=8 strategy=split prefetch=1" -lina-cut-state -lina-place-state -lina-pipeline-loads | FileCheck %s
// RUN: lina-opt %s -lina-chunk=chunk-size=64 -lina-schedule="tile-v=32 warps=8 strategy=split prefetch=1" -lina-cut-state -lina-place-state -lina-pipeline-loads | FileCheck %s --check-prefix=C64
// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-schedule="tile-v=32 warps=8 strategy=split" -lina-cut-state -lina-place-state -lina-pipeline-loads | FileCheck %s --check-prefix=NONE
// RUN: lina-opt %s -lina-chunk=chunk-size=16 -lina-schedule="tile-v=32 warps=8 strategy=split prefetch=1" -lina-cut-state -lina-place-state -lina-pipeline-loads -lina-schedule="tile-v=32 warps=8 strategy=split" | FileCheck %s --check-prefix=NONE

// How far ahead the split scan fetches its tiles, in buffers a tile. Mamba-2's
// scan copies every tile straight into shared memory (cp.async) and its
// 16-token chunks are small: a third copy, two chunks ahead, still leaves
// room for the CTAs eight-warp scans can have.
// CHECK-LABEL: lina.chunked @mamba2
// CHECK-SAME: placement <state = registers, ring = 3> {
lina.recurrence @mamba2 <decay = scalar, update = additive, key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = bf16, initial_state = true, final_state = true>

// Gated DeltaNet's scan loads more per chunk (W, decayed q and k, u): two
// buffers, one chunk ahead; a third would cost it CTAs it can use.
// CHECK-LABEL: lina.chunked @gdn
// CHECK-SAME: placement <state = registers, ring = 2> {
lina.recurrence @gdn <decay = scalar, update = delta, beta = given, qk_l2norm = true, key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = bf16, initial_state = true, final_state = true>

// In f32 the tiles take twice the bytes: a second buffer would cost the
// scan its second CTA an SM, so it fetches the next chunk through
// registers into the one buffer.
// CHECK-LABEL: lina.chunked @gdn_f32
// CHECK-SAME: placement <ring = 1> {
lina.recurrence @gdn_f32 <decay = scalar, update = delta, beta = given, qk_l2norm = true, key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = f32, initial_state = true, final_state = true>

// RWKV-7's 64-token chunks: the fetched tiles' buffers do not fit beside
// the rest, so each chunk loads its tiles when it reaches them (no record).
// C64-LABEL: lina.chunked @rwkv7
// C64-NOT: ring =
// C64: lina.yield
lina.recurrence @rwkv7 <decay = per_channel, update = dplr, key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = bf16, initial_state = true, final_state = true>

// Without prefetch nothing is fetched ahead, and a new schedule drops the
// ring chosen for the old one.
// NONE-NOT: ring =
