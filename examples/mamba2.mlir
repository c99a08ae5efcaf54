// Mamba-2 / simple GLA: a data-dependent scalar decay per head and token.
//
//   S_t = exp(g_t) S_{t-1} + k_t v_t^T
//   o_t = S_t^T (scale q_t), g_t <= 0 in log space
//
// In the generic form S_t = (D_t + b_t a_t^T) S_{t-1} + w_t k_t v_t^T:
//   D_t = exp(g_t) I, b = a = 0, w = 1
//
// Try it: lina run examples/mamba2.mlir --shape 2,100,4 --dk 32 --dv 32

lina.recurrence @mamba2 <
    decay = scalar, update = additive,
    key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = bf16,
    initial_state = true, final_state = true>
