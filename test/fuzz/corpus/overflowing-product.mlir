lina.recurrence @big <decay = per_channel, update = dplr, key_dim = 1024, value_dim = 1024, heads = 65536, value_heads = 65536, dtype = f32, scale = 1.0e308, gate = given>
