// RUN: lina-opt %s -split-input-file -verify-diagnostics
// The parser's errors for #lina.spec: a wrong value lists the valid ones, a
// wrong field name lists the fields, and each names the one a typo was near.

// expected-error @+1 {{dtype must be one of: bf16, f16, f32; got 'bf61' (did you mean 'bf16'?)}}
lina.recurrence @dtype_typo <decay = none, update = additive, key_dim = 64, value_dim = 64, heads = 4, value_heads = 4, dtype = bf61>

// -----

// A type that is no keyword is answered with the list alone.
// expected-error @+1 {{dtype must be one of: bf16, f16, f32}}
lina.recurrence @dtype_not_keyword <decay = none, update = additive, key_dim = 64, value_dim = 64, heads = 4, value_heads = 4, dtype = vector<4xf32>>

// -----

// expected-error @+1 {{decay must be one of: none, fixed, scalar, per_channel; got 'scalr' (did you mean 'scalar'?)}}
lina.recurrence @decay_typo <decay = scalr, update = additive, key_dim = 64, value_dim = 64, heads = 4, value_heads = 4, dtype = bf16>

// -----

// expected-error @+1 {{update must be one of: additive, delta, dplr; got 'detla' (did you mean 'delta'?)}}
lina.recurrence @update_typo <decay = none, update = detla, beta = given, key_dim = 64, value_dim = 64, heads = 4, value_heads = 4, dtype = bf16>

// -----

// expected-error @+1 {{beta must be one of: none, given, sigmoid, two_sigmoid; got 'sigmod' (did you mean 'sigmoid'?)}}
lina.recurrence @beta_typo <decay = none, update = delta, beta = sigmod, key_dim = 64, value_dim = 64, heads = 4, value_heads = 4, dtype = bf16>

// -----

// expected-error @+1 {{gate must be one of: given, softplus, lower_bound; got 'softplu' (did you mean 'softplus'?)}}
lina.recurrence @gate_typo <decay = scalar, update = additive, gate = softplu, key_dim = 64, value_dim = 64, heads = 4, value_heads = 4, dtype = bf16>

// -----

// expected-error @+1 {{low_rank_a must be one of: input, zero, beta_key, neg_decayed_key; got 'betakey' (did you mean 'beta_key'?)}}
lina.recurrence @low_rank_typo <decay = per_channel, update = dplr, beta = given, low_rank_a = betakey, key_dim = 64, value_dim = 64, heads = 4, value_heads = 4, dtype = bf16>

// -----

// expected-error @+1 {{low_rank_b must be one of: input, zero, beta_key, neg_decayed_key; got 'zeros' (did you mean 'zero'?)}}
lina.recurrence @low_rank_b_typo <decay = per_channel, update = dplr, low_rank_b = zeros, key_dim = 64, value_dim = 64, heads = 4, value_heads = 4, dtype = bf16>

// -----

// expected-error @+1 {{write must be one of: one, beta; got 'bet' (did you mean 'beta'?)}}
lina.recurrence @write_typo <decay = per_channel, update = dplr, beta = given, write = bet, key_dim = 64, value_dim = 64, heads = 4, value_heads = 4, dtype = bf16>

// -----

// A value far from every valid one is not guessed at.
// expected-error @+1 {{decay must be one of: none, fixed, scalar, per_channel; got 'exponential'}}
lina.recurrence @decay_far <decay = exponential, update = additive, key_dim = 64, value_dim = 64, heads = 4, value_heads = 4, dtype = bf16>

// -----

// expected-error @+1 {{qk_l2norm must be one of: false, true; got 'yes'}}
lina.recurrence @bool_word <decay = none, update = additive, qk_l2norm = yes, key_dim = 64, value_dim = 64, heads = 4, value_heads = 4, dtype = bf16>

// -----

// expected-error @+1 {{key_dim must be an integer, e.g. 128}}
lina.recurrence @dim_word <decay = none, update = additive, key_dim = big, value_dim = 64, heads = 4, value_heads = 4, dtype = bf16>

// -----

// expected-error @+1 {{scale must be an f64 literal, e.g. 0.0883883}}
lina.recurrence @integer_scale <decay = none, update = additive, scale = 1, key_dim = 64, value_dim = 64, heads = 4, value_heads = 4, dtype = bf16>

// -----

// expected-error @+1 {{unknown field 'keydim' (did you mean 'key_dim'?); the fields are: decay, update, gate, gate_lower_bound, beta, low_rank_a, low_rank_b, write, qk_l2norm, scale, key_dim, value_dim, heads, value_heads, dtype, initial_state, final_state, varlen}}
lina.recurrence @field_typo <decay = none, update = additive, keydim = 64, value_dim = 64, heads = 4, value_heads = 4, dtype = bf16>

// -----

// expected-error @+1 {{unknown field 'chunk'; the fields are: decay, update,}}
lina.recurrence @field_far <decay = none, update = additive, chunk = 64, key_dim = 64, value_dim = 64, heads = 4, value_heads = 4, dtype = bf16>

// -----

// expected-error @+1 {{field 'heads' is given twice}}
lina.recurrence @twice <decay = none, update = additive, key_dim = 64, value_dim = 64, heads = 4, heads = 4, value_heads = 4, dtype = bf16>

// -----

// expected-error @+1 {{expected a field name, one of: decay, update, gate,}}
lina.recurrence @no_field <decay = none, update = additive, 64, value_dim = 64, heads = 4, value_heads = 4, dtype = bf16>
