lina.recurrence @huge <decay = scalar, update = additive, key_dim = 99999999999999999999999, value_dim = 9223372036854775807, heads = -9223372036854775808, value_heads = 1, dtype = bf16>
