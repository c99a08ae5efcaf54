// RUN: lina-opt %s -lina-choose-schedule | FileCheck %s --check-prefix=UNKNOWN
// RUN: lina-opt %s -lina-specialize -lina-choose-schedule="arch=sm_90 sm-count=132 sequences=1 seq-len=8192" | FileCheck %s --check-prefix=H200
// RUN: lina-opt %s -lina-choose-schedule="arch=sm_90 sm-count=132 sequences=2 seq-len=16384" | FileCheck %s --check-prefix=LONG
// RUN: lina-opt %s -lina-choose-schedule="arch=sm_90 sm-count=132 sequences=4 seq-len=4096" | FileCheck %s --check-prefix=MANY
// RUN: lina-opt %s -lina-choose-schedule="arch=sm_80 sm-count=108 sequences=1 seq-len=8192" | FileCheck %s --check-prefix=A100
// RUN: lina-opt %s -lina-specialize -lina-choose-schedule="arch=sm_90 sm-count=132 sequences=1 seq-len=8192" -lina-chunk -lina-schedule | FileCheck %s --check-prefix=FOLLOW
// RUN: lina-opt %s -lina-choose-schedule="arch=sm_90 sm-count=132 sequences=1 seq-len=8192" -lina-chunk=chunk-size=16 -lina-schedule | FileCheck %s --check-prefix=OVERRIDE
// RUN: lina-opt %s -lina-choose-schedule -lina-chunk -lina-schedule="tile-v=64 warps=4" | FileCheck %s --check-prefix=REPLACE
// RUN: lina-opt %s -lina-choose-schedule="arch=sm_90 sm-count=132 sequences=1 seq-len=8192" -lina-specialize | FileCheck %s --check-prefix=RESPECIALIZED

// The schedule a call gets when nothing was tuned for it, recorded on the
// spec. Knowing nothing of the call: 16-token chunks whose split scan
// fetches a chunk ahead, 32 value columns on eight warps; 32-token chunks
// for the scalar-gated additive rules at key_dim 64, whose scan step is
// cheap enough that fewer steps win.
// UNKNOWN: lina.recurrence @gdn <{{.*}}> chunk_size(16) schedule <tile_v = 32, warps = 8, strategy = split, prefetch = true>
// UNKNOWN: lina.recurrence @mamba2 <{{.*}}> chunk_size(16) schedule <tile_v = 32, warps = 8, strategy = split, prefetch = true>
// UNKNOWN: lina.recurrence @mamba2_d64 <{{.*}}> chunk_size(32) schedule <tile_v = 32, warps = 8, strategy = split, prefetch = true>
// UNKNOWN: lina.recurrence @rwkv7 <{{.*}}> chunk_size(16) schedule <tile_v = 32, warps = 8, strategy = split, prefetch = true>
// UNKNOWN: lina.recurrence @kda_as_dplr <decay = per_channel, update = dplr, {{.*}}> chunk_size(16) schedule <tile_v = 32, warps = 8, strategy = split, prefetch = true>

// One sequence of 8192 tokens on an H200. The delta rule runs the wgmma
// scan at any grid. Mamba-2's 16 heads leave most SMs idle: each sequence
// is cut into 8 pieces, the most that keep to a CTA an SM (8 x 16 = 128 of
// 132) and 1024 tokens a piece. rwkv7 (bf16, d128) takes its printed
// pair at any grid, a 64-column tile on eight warps. KDA written as DPLR is
// KDA once specialized, and gets KDA's wgmma scan. Mamba-2 at d64 takes the
// wgmma scan at any grid, a warpgroup a head.
// H200: lina.recurrence @gdn <{{.*}}> chunk_size(64) schedule <tile_v = 128, warps = 8, prefetch = true, mma = warpgroup>
// H200: lina.recurrence @mamba2 <{{.*}}> chunk_size(64) schedule <tile_v = 128, warps = 8, prefetch = true, segments = 8, mma = warpgroup>
// H200: lina.recurrence @mamba2_d64 <{{.*}}> chunk_size(64) schedule <tile_v = 64, warps = 4, prefetch = true, mma = warpgroup>
// H200: lina.recurrence @rwkv7 <{{.*}}> chunk_size(64) schedule <tile_v = 64, warps = 8, prefetch = true, mma = warpgroup>
// H200: lina.recurrence @kda_as_dplr <decay = per_channel, update = delta, {{.*}}> chunk_size(64) schedule <tile_v = 128, warps = 8, prefetch = true, mma = warpgroup>
// Gated DeltaNet in f16 runs the kernels printed from its ops: its 16
// heads give two CTAs a head room in the SMs, so a CTA takes a 64-column
// value tile on eight warps, its scores on the second warpgroup.
// H200: lina.recurrence @gdn_f16 <{{.*}}> chunk_size(64) schedule <tile_v = 64, warps = 8, prefetch = true, mma = warpgroup>
// rwkv7 in f16 keeps the split kernels (its printed pair not timed
// against them).
// H200: lina.recurrence @rwkv7_f16 <{{.*}}> chunk_size(16) schedule <tile_v = 32, warps = 8, strategy = split, prefetch = true>

// Two sequences of 16384: 32 heads, four pieces a sequence keep to 128
// CTAs. Four of 4096: 64 heads are more than a quarter of the SMs, no
// pieces, and the additive rule's wgmma scan takes whole heads.
// LONG: lina.recurrence @mamba2 <{{.*}}> chunk_size(64) schedule <tile_v = 128, warps = 8, prefetch = true, segments = 4, mma = warpgroup>
// MANY: lina.recurrence @mamba2 <{{.*}}> chunk_size(64) schedule <tile_v = 128, warps = 8, prefetch = true, mma = warpgroup>

// Off Hopper, no wgmma: 96 heads of a CTA each cover two thirds of 108 SMs,
// so each warp of eight takes 16 columns of a whole head; no two CTAs an SM
// with fewer CTAs than SMs. Mamba-2's pieces go to the split scan.
// A100: lina.recurrence @gdn <{{.*}}> chunk_size(16) schedule <tile_v = 128, warps = 8, strategy = split, prefetch = true>
// A100: lina.recurrence @mamba2 <{{.*}}> chunk_size(16) schedule <tile_v = 128, warps = 8, strategy = split, prefetch = true, segments = 8>
// A100: lina.recurrence @rwkv7 <{{.*}}> chunk_size(16) schedule <tile_v = 32, warps = 8, strategy = split, prefetch = true>

lina.recurrence @gdn <decay = scalar, update = delta, beta = given, qk_l2norm = true, key_dim = 128, value_dim = 128, heads = 96, value_heads = 96, dtype = bf16>
lina.recurrence @mamba2 <decay = scalar, update = additive, key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = bf16>
lina.recurrence @mamba2_d64 <decay = scalar, update = additive, key_dim = 64, value_dim = 64, heads = 8, value_heads = 8, dtype = bf16>
lina.recurrence @rwkv7 <decay = per_channel, update = dplr, key_dim = 128, value_dim = 128, heads = 96, value_heads = 96, dtype = bf16>
lina.recurrence @kda_as_dplr <decay = per_channel, update = dplr, beta = given, qk_l2norm = true, low_rank_a = neg_decayed_key, low_rank_b = beta_key, write = beta, key_dim = 128, value_dim = 128, heads = 96, value_heads = 96, dtype = bf16>
lina.recurrence @gdn_f16 <decay = scalar, update = delta, beta = given, qk_l2norm = true, key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = f16>
lina.recurrence @rwkv7_f16 <decay = per_channel, update = dplr, key_dim = 128, value_dim = 128, heads = 96, value_heads = 96, dtype = f16>

// lina-chunk cuts at the recorded chunk size and carries the schedule, which
// a lina-schedule given no options keeps.
// FOLLOW: lina.chunked @gdn <{{.*}}> chunk_size(64) schedule <tile_v = 128, warps = 8, prefetch = true, mma = warpgroup> {
// FOLLOW: lina.chunked @mamba2_d64 <{{.*}}> chunk_size(64) schedule <tile_v = 64, warps = 4, prefetch = true, mma = warpgroup> {
// A chunk size given to lina-chunk wins: a schedule chosen for another
// chunk size (gdn's, mamba2_d64's and rwkv7's 64) stays behind, and
// lina-schedule lays those ops out from its own options; one chosen for 16
// (rwkv7's in f16) goes along.
// OVERRIDE: lina.chunked @gdn <{{.*}}> chunk_size(16) schedule <tile_v = 64, warps = 4> {
// OVERRIDE: lina.chunked @mamba2_d64 <{{.*}}> chunk_size(16) schedule <tile_v = 64, warps = 4> {
// OVERRIDE: lina.chunked @rwkv7 <{{.*}}> chunk_size(16) schedule <tile_v = 64, warps = 4> {
// OVERRIDE: lina.chunked @rwkv7_f16 <{{.*}}> chunk_size(16) schedule <tile_v = 32, warps = 8, strategy = split, prefetch = true> {
// Options given to lina-schedule replace the chosen schedule.
// REPLACE: lina.chunked @gdn <{{.*}}> chunk_size(16) schedule <tile_v = 64, warps = 4> {
// A spec lina-specialize rewrites loses the schedule chosen for it as it
// was; the others keep theirs.
// RESPECIALIZED: lina.recurrence @gdn <{{.*}}> chunk_size(64) schedule
// RESPECIALIZED: lina.recurrence @kda_as_dplr <decay = per_channel, update = delta, {{[^>]*}}>{{$}}
