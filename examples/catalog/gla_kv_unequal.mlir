// GLA with values half as wide as keys (K = 128, V = 64).
// nearest preset: gla; fla's nearest op: chunk_gla
lina.recurrence @gla_kv_unequal <
    decay = per_channel, update = additive,
    key_dim = 128, value_dim = 64, heads = 16, value_heads = 16, dtype = bf16,
    initial_state = true, final_state = true>
