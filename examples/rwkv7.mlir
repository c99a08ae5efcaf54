// RWKV-7: a diagonal-plus-low-rank (DPLR) transition with free vectors a, b.
//
//   S_t = (Diag(exp(w_t)) + b_t a_t^T) S_{t-1} + k_t v_t^T
//   o_t = S_t^T (scale q_t); the log decay w_t is the input g
//
// In the generic form S_t = (D_t + b_t a_t^T) S_{t-1} + w_t k_t v_t^T:
//   D_t = Diag(exp(w_t)), b, a free inputs, w = 1
//
// Try it: lina run examples/rwkv7.mlir --shape 2,100,4 --dk 32 --dv 32

lina.recurrence @rwkv7 <
    decay = per_channel, update = dplr,
    key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = bf16,
    initial_state = true, final_state = true>
