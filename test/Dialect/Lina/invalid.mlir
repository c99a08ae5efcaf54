// RUN: lina-opt %s -split-input-file -verify-diagnostics
// One case per verifier error: each names the field and the fix.

// expected-error @+1 {{value_heads (6) must be a multiple of heads (4)}}
lina.recurrence @grouped <decay = scalar, update = additive, key_dim = 64, value_dim = 64, heads = 4, value_heads = 6, dtype = bf16>

// -----

// expected-error @+1 {{update = delta needs beta: set beta = given, sigmoid or two_sigmoid}}
lina.recurrence @delta_without_beta <decay = scalar, update = delta, key_dim = 64, value_dim = 64, heads = 4, value_heads = 4, dtype = bf16>

// -----

// expected-error @+1 {{key_dim must be positive, got 0}}
lina.recurrence @zero_dim <decay = none, update = additive, key_dim = 0, value_dim = 64, heads = 4, value_heads = 4, dtype = bf16>

// -----

// expected-error @+1 {{value_dim must be positive, got -8}}
lina.recurrence @negative_dim <decay = none, update = additive, key_dim = 64, value_dim = -8, heads = 4, value_heads = 4, dtype = bf16>

// -----

// expected-error @+1 {{heads must be positive, got 0}}
lina.recurrence @no_heads <decay = none, update = additive, key_dim = 64, value_dim = 64, heads = 0, value_heads = 4, dtype = bf16>

// -----

// expected-error @+1 {{key_dim and value_dim must be at most 1024}}
lina.recurrence @huge_dim <decay = none, update = additive, key_dim = 4096, value_dim = 64, heads = 4, value_heads = 4, dtype = bf16>

// -----

// expected-error @+1 {{dtype must be one of: bf16, f16, f32; got 'i32'}}
lina.recurrence @bad_dtype <decay = none, update = additive, key_dim = 64, value_dim = 64, heads = 4, value_heads = 4, dtype = i32>

// -----

// expected-error @+1 {{beta is only used by update = delta}}
lina.recurrence @stray_beta <decay = none, update = additive, beta = sigmoid, key_dim = 64, value_dim = 64, heads = 4, value_heads = 4, dtype = bf16>

// -----

// expected-error @+1 {{gate = softplus computes a data-dependent gate, but decay = none; use decay = scalar or per_channel, or gate = given}}
lina.recurrence @gate_without_decay <decay = none, update = additive, gate = softplus, key_dim = 64, value_dim = 64, heads = 4, value_heads = 4, dtype = bf16>

// -----

// expected-error @+1 {{gate_lower_bound must be a finite negative log gate}}
lina.recurrence @positive_bound <decay = per_channel, update = additive, gate = lower_bound, gate_lower_bound = 2.0, key_dim = 64, value_dim = 64, heads = 4, value_heads = 4, dtype = bf16>

// -----

// expected-error @+1 {{gate_lower_bound is only used with gate = lower_bound}}
lina.recurrence @stray_bound <decay = per_channel, update = additive, gate_lower_bound = -5.0, key_dim = 64, value_dim = 64, heads = 4, value_heads = 4, dtype = bf16>

// -----

// expected-error @+1 {{scale must be finite and non-zero}}
lina.recurrence @zero_scale <decay = none, update = additive, scale = 0.0, key_dim = 64, value_dim = 64, heads = 4, value_heads = 4, dtype = bf16>

// -----

// expected-error @+1 {{low_rank_a and low_rank_b describe the dplr update; remove them (update is delta)}}
lina.recurrence @stray_low_rank <decay = scalar, update = delta, beta = given, low_rank_a = zero, key_dim = 64, value_dim = 64, heads = 4, value_heads = 4, dtype = bf16>

// -----

// expected-error @+1 {{low_rank_a/low_rank_b = beta_key and write = beta need beta}}
lina.recurrence @beta_key_without_beta <decay = per_channel, update = dplr, low_rank_b = beta_key, key_dim = 64, value_dim = 64, heads = 4, value_heads = 4, dtype = bf16>

// -----

// expected-error @+1 {{missing field 'key_dim'; a spec needs: decay, update, key_dim, value_dim, heads, value_heads, dtype}}
lina.recurrence @missing_dim <decay = none, update = additive, value_dim = 64, heads = 4, value_heads = 4, dtype = bf16>

// -----

// expected-error @+1 {{decay must be one of: none, fixed, scalar, per_channel; got 'exponential'}}
lina.recurrence @unknown_decay <decay = exponential, update = additive, key_dim = 64, value_dim = 64, heads = 4, value_heads = 4, dtype = bf16>
