// Linear attention (Katharopoulos et al.): no decay, additive update.
//
//   S_t = S_{t-1} + k_t v_t^T
//   o_t = S_t^T (scale q_t)
//
// In the generic form S_t = (D_t + b_t a_t^T) S_{t-1} + w_t k_t v_t^T:
//   D_t = I, b = a = 0, w = 1
//
// Try it: lina run examples/linear_attn.mlir --shape 2,100,4 --dk 32 --dv 32

lina.recurrence @linear_attn <
    decay = none, update = additive,
    key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = bf16,
    initial_state = true, final_state = true>
