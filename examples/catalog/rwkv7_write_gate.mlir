// DPLR with free a and b (RWKV-7's transition) and a sigmoid-gated write
// beta k v^T.
// nearest preset: rwkv7; fla's nearest op: chunk_dplr_delta_rule
lina.recurrence @rwkv7_write_gate <
    decay = per_channel, update = dplr, beta = sigmoid, write = beta,
    key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = bf16,
    initial_state = true, final_state = true>
