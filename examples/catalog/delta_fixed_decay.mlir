// The delta rule with a fixed, per-head decay (RetNet's gamma):
// S_t = gamma (I - beta k k^T) S_{t-1} + beta k v^T.
// nearest preset: gdn; fla's nearest op: chunk_gated_delta_rule
lina.recurrence @delta_fixed_decay <
    decay = fixed, update = delta, beta = given, qk_l2norm = true,
    key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = bf16,
    initial_state = true, final_state = true>
