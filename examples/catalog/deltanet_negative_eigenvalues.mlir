// DeltaNet with beta in (0, 2), so that I - beta k k^T may have a negative
// eigenvalue (fla's allow_neg_eigval).
// nearest preset: deltanet; fla's nearest op: chunk_delta_rule
lina.recurrence @deltanet_negative_eigenvalues <
    decay = none, update = delta, beta = two_sigmoid, qk_l2norm = true,
    key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = bf16,
    initial_state = true, final_state = true>
