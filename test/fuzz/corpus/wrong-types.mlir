lina.recurrence @types <decay = 3, update = "delta", beta = 1.5, qk_l2norm = 7, key_dim = 1.0, value_dim = true, heads = @x, value_heads = [], dtype = "bf16">
