lina.recurrence @nan <decay = none, update = additive, scale = 0x7FF8000000000000, key_dim = 8, value_dim = 8, heads = 1, value_heads = 1, dtype = f32>
