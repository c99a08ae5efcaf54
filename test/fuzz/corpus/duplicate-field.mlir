lina.recurrence @dup <decay = none, decay = scalar, update = additive, key_dim = 8, value_dim = 8, heads = 1, value_heads = 1, dtype = f32>
