// GLA whose write is gated by a sigmoid: S_t = Diag(exp(g_t)) S_{t-1} +
// sigmoid(x_t) k_t v_t^T, written as a dplr spec with a zero low-rank term.
// lina-specialize makes it the additive rule with a weighted write.
// nearest preset: gla; fla's nearest op: chunk_gla
lina.recurrence @gla_write_gate <
    decay = per_channel, update = dplr, beta = sigmoid,
    low_rank_a = zero, write = beta,
    key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = bf16,
    initial_state = true, final_state = true>
