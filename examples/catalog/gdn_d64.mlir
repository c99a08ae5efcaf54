// Gated DeltaNet with 64-wide heads.
// nearest preset: gdn; fla's nearest op: chunk_gated_delta_rule
lina.recurrence @gdn_d64 <
    decay = scalar, update = delta, beta = given, qk_l2norm = true,
    key_dim = 64, value_dim = 64, heads = 16, value_heads = 16, dtype = bf16,
    initial_state = true, final_state = true>
