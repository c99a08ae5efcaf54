// RUN: lina-opt %s -split-input-file -lina-chunk=chunk-size=32 -lina-chunk-backward -lina-fuse-sums -lina-schedule="tile-v=64 warps=8" -lina-pack-states -lina-global-tiles | FileCheck %s
// RUN: lina-opt %s -split-input-file -lina-chunk=chunk-size=32 -lina-chunk-backward -lina-fuse-sums -lina-schedule="tile-v=64 warps=8" -lina-pack-states -lina-global-tiles -lina-global-tiles | FileCheck %s
// RUN: lina-opt %s -split-input-file -lina-chunk=chunk-size=32 -lina-chunk-backward -lina-fuse-sums -lina-schedule="tile-v=64 warps=8" -lina-pack-states -lina-global-tiles | lina-translate --split-input-file --emit-cuda-backward | FileCheck %s --check-prefix=EMIT
// RUN: lina-opt %s -split-input-file -lina-chunk=chunk-size=32 -lina-chunk-backward -lina-fuse-sums -lina-schedule="tile-v=64 warps=8" | not lina-translate --split-input-file --emit-cuda-backward 2>&1 | FileCheck %s --check-prefix=UNPLACED

// Gated DeltaNet's backward at 32-token chunks of 64 value columns, d128:
// the gradients kernel's tiles need about 290 KB (the chunk's two states
// packed in bf16 among them), more than a CTA's shared memory, so the least
// touched of them are kept in global memory: the raw q and k (loaded,
// normalised, and read again only by their norms' gradients). The rest fit
// (the UT transform's first solve, W, among them since the gradient through
// two negs is one sum); the reverse scan fits and keeps no tile there.
// Planned twice, the same.
// CHECK-LABEL: lina.chunked_backward @gdn_backward
// CHECK: lina.load q {lina.in_global = ["chunks"]} : <32x128>
// CHECK-NEXT: lina.load k {lina.in_global = ["chunks"]} : <32x128>
// CHECK-NEXT: lina.load v : <32x128>
// CHECK-NOT: lina.in_global
// CHECK: lina.yield
// The emitter lays them out as recorded, past shared memory, a region a CTA:
// EMIT: lina_chunk_backward(lina::Params p, lina::GradParams d)
// EMIT: float *spill = d.spill + ((i64)blockIdx.y * gridDim.x + blockIdx.x) *
// EMIT: [[Q:fetched[0-9]+]].fetch((const bf16 *)p.q
// EMIT: [[K:fetched[0-9]+]].fetch((const bf16 *)p.k
// EMIT: [[Q]].commit((spill + {{[0-9]+}}));
// EMIT-NEXT: [[K]].commit((spill + {{[0-9]+}}));
// EMIT-NOT: tri_solve<32, 128>((spill
// Unplaced, the kernel is refused, not laid out some other way:
// UNPLACED: error: the backward's gradients kernel needs {{[0-9]+}} bytes of shared memory for its tiles, more than the 232448 a CTA can have, and no op records a tile of it in global memory (run -lina-global-tiles to place them)
lina.recurrence @gdn <decay = scalar, update = delta, beta = given, qk_l2norm = true, key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = bf16, initial_state = true, final_state = true>

// -----

// At d64 everything fits: no record.
// CHECK-LABEL: lina.chunked_backward @small_backward
// CHECK-NOT: lina.in_global
// CHECK: lina.yield
// EMIT: lina_chunk_backward(lina::Params p, lina::GradParams d)
// EMIT-NOT: spill
// EMIT: }
lina.recurrence @small <decay = scalar, update = delta, beta = given, qk_l2norm = true, key_dim = 64, value_dim = 64, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true>
