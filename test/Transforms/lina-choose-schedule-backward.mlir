// RUN: lina-opt %s -lina-specialize -lina-choose-schedule=backward=true | FileCheck %s --check-prefix=CHOSEN
// RUN: lina-opt %s -lina-specialize -lina-choose-schedule=backward=true -lina-chunk -lina-chunk-backward -lina-schedule | FileCheck %s --check-prefix=FOLLOW
// RUN: lina-opt %s -lina-specialize -lina-choose-schedule=backward=true -lina-chunk -lina-chunk-backward -lina-schedule="tile-v=16 warps=4 strategy=materialize" | FileCheck %s --check-prefix=REPLACE

// The backward's layout when nothing was tuned, recorded on the spec as a
// materialize schedule (the forward's part of a backward writes every
// chunk's starting state). At d128 and d64, scalar, fixed or no decay:
// 32-token chunks of whole heads on eight warps (64 columns where the chunk
// states are fp32, f16 and f32 specs); per-channel decays:
// 16-token chunks of whole heads on sixteen warps (gla at d128: 32-token
// ones); DPLR: 64 columns of them. Heads of other widths, where none of this was timed, keep 16-token
// chunks of 32 columns (their whole width below that) on eight warps, the
// layout that needs the least shared memory. KDA written as DPLR gets
// KDA's layout once specialized.
// CHOSEN: lina.recurrence @gdn <{{.*}}> chunk_size(32) schedule <tile_v = 128, warps = 8, strategy = materialize>
// CHOSEN: lina.recurrence @mamba2_d64 <{{.*}}> chunk_size(32) schedule <tile_v = 64, warps = 8, strategy = materialize>
// CHOSEN: lina.recurrence @kda_d64 <{{.*}}> chunk_size(16) schedule <tile_v = 64, warps = 16, strategy = materialize>
// CHOSEN: lina.recurrence @rwkv7_d64 <{{.*}}> chunk_size(16) schedule <tile_v = 64, warps = 16, strategy = materialize>
// CHOSEN: lina.recurrence @kda <{{.*}}> chunk_size(16) schedule <tile_v = 128, warps = 16, strategy = materialize>
// CHOSEN: lina.recurrence @gla <{{.*}}> chunk_size(32) schedule <tile_v = 128, warps = 16, strategy = materialize>
// CHOSEN: lina.recurrence @gla_d64 <{{.*}}> chunk_size(16) schedule <tile_v = 64, warps = 16, strategy = materialize>
// CHOSEN: lina.recurrence @gla_kv_unequal <{{.*}}> chunk_size(16) schedule <tile_v = 32, warps = 8, strategy = materialize>
// CHOSEN: lina.recurrence @rwkv7 <{{.*}}> chunk_size(16) schedule <tile_v = 64, warps = 16, strategy = materialize>
// CHOSEN: lina.recurrence @kda_as_dplr <decay = per_channel, update = delta, {{.*}}> chunk_size(16) schedule <tile_v = 128, warps = 16, strategy = materialize>
// CHOSEN: lina.recurrence @gdn_d256 <{{.*}}> chunk_size(16) schedule <tile_v = 32, warps = 8, strategy = materialize>
// CHOSEN: lina.recurrence @retnet_v96 <{{.*}}> chunk_size(16) schedule <tile_v = 32, warps = 8, strategy = materialize>
// CHOSEN: lina.recurrence @linear_attn_d16 <{{.*}}> chunk_size(16) schedule <tile_v = 16, warps = 8, strategy = materialize>

// lina-chunk cuts at the recorded size and carries the schedule;
// lina-chunk-backward gives the backward the same value tile and warps,
// which a lina-schedule given no options keeps on both ops.
// FOLLOW: lina.chunked @kda <{{.*}}> chunk_size(16) schedule <tile_v = 128, warps = 16, strategy = materialize> {
// FOLLOW: lina.chunked_backward @kda_backward <{{.*}}> chunk_size(16) schedule <tile_v = 128, warps = 16> {
// FOLLOW: lina.chunked @rwkv7 <{{.*}}> chunk_size(16) schedule <tile_v = 64, warps = 16, strategy = materialize> {
// FOLLOW: lina.chunked_backward @rwkv7_backward <{{.*}}> chunk_size(16) schedule <tile_v = 64, warps = 16> {

// Options given to lina-schedule lay both ops out from them instead.
// REPLACE: lina.chunked @kda <{{.*}}> chunk_size(16) schedule <tile_v = 16, warps = 4, strategy = materialize> {
// REPLACE: lina.chunked_backward @kda_backward <{{.*}}> chunk_size(16) schedule <tile_v = 16, warps = 4> {

lina.recurrence @gdn <decay = scalar, update = delta, beta = given, qk_l2norm = true, key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = bf16>
lina.recurrence @mamba2_d64 <decay = scalar, update = additive, key_dim = 64, value_dim = 64, heads = 8, value_heads = 8, dtype = bf16>
lina.recurrence @kda_d64 <decay = per_channel, update = delta, beta = given, qk_l2norm = true, key_dim = 64, value_dim = 64, heads = 8, value_heads = 8, dtype = bf16>
lina.recurrence @rwkv7_d64 <decay = per_channel, update = dplr, key_dim = 64, value_dim = 64, heads = 8, value_heads = 8, dtype = bf16>
lina.recurrence @kda <decay = per_channel, update = delta, beta = given, qk_l2norm = true, key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = bf16>
lina.recurrence @gla <decay = per_channel, update = additive, key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = bf16>
lina.recurrence @gla_d64 <decay = per_channel, update = additive, key_dim = 64, value_dim = 64, heads = 8, value_heads = 8, dtype = bf16>
lina.recurrence @gla_kv_unequal <decay = per_channel, update = additive, key_dim = 128, value_dim = 64, heads = 16, value_heads = 16, dtype = bf16>
lina.recurrence @rwkv7 <decay = per_channel, update = dplr, key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = bf16>
lina.recurrence @kda_as_dplr <decay = per_channel, update = dplr, beta = given, qk_l2norm = true, low_rank_a = neg_decayed_key, low_rank_b = beta_key, write = beta, key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = bf16>
lina.recurrence @gdn_d256 <decay = scalar, update = delta, beta = given, qk_l2norm = true, key_dim = 256, value_dim = 256, heads = 4, value_heads = 4, dtype = bf16>
lina.recurrence @retnet_v96 <decay = fixed, update = additive, key_dim = 64, value_dim = 96, heads = 4, value_heads = 4, dtype = bf16>
lina.recurrence @linear_attn_d16 <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 4, value_heads = 4, dtype = bf16>
