// Gated DeltaNet as Qwen3-Next runs it: the gate computed in the kernel
// (-exp(A_log) softplus(x + dt_bias)), beta = sigmoid(x), and four value
// heads per key head.
// nearest preset: gdn; fla's nearest op: chunk_gated_delta_rule
lina.recurrence @gdn_computed_gates_gva <
    decay = scalar, gate = softplus, update = delta, beta = sigmoid,
    qk_l2norm = true,
    key_dim = 128, value_dim = 128, heads = 4, value_heads = 16, dtype = bf16,
    initial_state = true, final_state = true>
