// Mamba-2's scalar decay at d64 in f16, dt A computed in the kernel.
// nearest preset: mamba2; fla's nearest op: chunk_simple_gla
lina.recurrence @mamba2_d64_f16 <
    decay = scalar, gate = softplus, update = additive,
    key_dim = 64, value_dim = 64, heads = 16, value_heads = 16, dtype = f16,
    initial_state = true, final_state = true>
