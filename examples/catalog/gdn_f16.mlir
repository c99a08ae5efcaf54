// Gated DeltaNet in f16.
// nearest preset: gdn; fla's nearest op: chunk_gated_delta_rule
lina.recurrence @gdn_f16 <
    decay = scalar, update = delta, beta = given, qk_l2norm = true,
    key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = f16,
    initial_state = true, final_state = true>
