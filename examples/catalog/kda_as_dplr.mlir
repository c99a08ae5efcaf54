// KDA written in the DPLR form: D - beta k (D k)^T with the write beta k v^T
// is exactly the delta rule with a per-channel decay, which lina-specialize
// recognises.
// nearest preset: kda; fla's nearest op: chunk_kda
lina.recurrence @kda_as_dplr <
    decay = per_channel, update = dplr, beta = given, qk_l2norm = true,
    low_rank_a = neg_decayed_key, low_rank_b = beta_key, write = beta,
    key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = bf16,
    initial_state = true, final_state = true>
