// Kimi Delta Attention: the delta rule with a per-channel decay.
//
//   S_t = (I - beta_t k_t k_t^T) Diag(exp(g_t)) S_{t-1} + beta_t k_t v_t^T
//   o_t = S_t^T (scale q_t), q and k L2-normalised in the kernel
//
// In the generic form S_t = (D_t + b_t a_t^T) S_{t-1} + w_t k_t v_t^T:
//   D_t = Diag(exp(g_t)), b = beta k, a = -(exp(g_t) . k), w = beta
//
// Try it: lina run examples/kda.mlir --shape 2,100,4 --dk 32 --dv 32

lina.recurrence @kda <
    decay = per_channel, update = delta, beta = given, qk_l2norm = true,
    key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = bf16,
    initial_state = true, final_state = true>
