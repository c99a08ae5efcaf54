// KDA in f16 with its lower-bound gate computed in the kernel.
// nearest preset: kda; fla's nearest op: chunk_kda
lina.recurrence @kda_f16 <
    decay = per_channel, gate = lower_bound, update = delta, beta = sigmoid,
    qk_l2norm = true,
    key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = f16,
    initial_state = true, final_state = true>
