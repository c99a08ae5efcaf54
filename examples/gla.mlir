// GLA: a data-dependent decay per key channel.
//
//   S_t = Diag(exp(g_t)) S_{t-1} + k_t v_t^T
//   o_t = S_t^T (scale q_t), g_t in R^dk, g_t <= 0
//
// In the generic form S_t = (D_t + b_t a_t^T) S_{t-1} + w_t k_t v_t^T:
//   D_t = Diag(exp(g_t)), b = a = 0, w = 1
//
// Try it: lina run examples/gla.mlir --shape 2,100,4 --dk 32 --dv 32

lina.recurrence @gla <
    decay = per_channel, update = additive,
    key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = bf16,
    initial_state = true, final_state = true>
