// RetNet retention: a fixed decay gamma_h per head.
//
//   S_t = gamma_h S_{t-1} + k_t v_t^T
//   o_t = S_t^T (scale q_t)
//   the input g holds log(gamma_h) per value head, e.g. log(1 - 2^(-5-h))
//
// In the generic form S_t = (D_t + b_t a_t^T) S_{t-1} + w_t k_t v_t^T:
//   D_t = gamma_h I, b = a = 0, w = 1
//
// Try it: lina run examples/retnet.mlir --shape 2,100,4 --dk 32 --dv 32

lina.recurrence @retnet <
    decay = fixed, update = additive,
    key_dim = 128, value_dim = 128, heads = 16, value_heads = 16, dtype = bf16,
    initial_state = true, final_state = true>
