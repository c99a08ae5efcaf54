// RetNet's fixed decay with a sigmoid-gated write: S_t = gamma S_{t-1} +
// sigmoid(x_t) k_t v_t^T.
// nearest preset: retnet; fla's nearest op: chunk_simple_gla
lina.recurrence @retnet_write_gate <
    decay = fixed, update = additive, beta = sigmoid, write = beta,
    key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = bf16,
    initial_state = true, final_state = true>
