// RUN: lina-opt %s -lina-specialize | FileCheck %s

// A dplr transition whose vectors are tied to k, writing beta k v^T, is the
// delta rule.
// CHECK: lina.recurrence @tied <decay = per_channel, update = delta, beta = sigmoid, key_dim
lina.recurrence @tied <decay = per_channel, update = dplr, beta = sigmoid, low_rank_a = neg_decayed_key, low_rank_b = beta_key, write = beta, key_dim = 16, value_dim = 16, heads = 2, value_heads = 2, dtype = bf16>

// Tied vectors but a unit write: not the delta rule, left alone.
// CHECK: lina.recurrence @unit_write <decay = per_channel, update = dplr, beta = sigmoid, low_rank_a = neg_decayed_key, low_rank_b = beta_key, key_dim
lina.recurrence @unit_write <decay = per_channel, update = dplr, beta = sigmoid, low_rank_a = neg_decayed_key, low_rank_b = beta_key, key_dim = 16, value_dim = 16, heads = 2, value_heads = 2, dtype = bf16>

// A zero low-rank vector leaves a pure decay form.
// CHECK: lina.recurrence @no_low_rank <decay = scalar, update = additive, key_dim
lina.recurrence @no_low_rank <decay = scalar, update = dplr, low_rank_a = zero, key_dim = 16, value_dim = 16, heads = 2, value_heads = 2, dtype = bf16>

// ... and with the write beta k v^T, the additive rule's weighted write
// (beta kept: it is the write weight now).
// CHECK: lina.recurrence @zero_beta_write <decay = scalar, update = additive, beta = given, write = beta, key_dim
lina.recurrence @zero_beta_write <decay = scalar, update = dplr, beta = given, low_rank_a = zero, write = beta, key_dim = 16, value_dim = 16, heads = 2, value_heads = 2, dtype = bf16>

// Free vectors (RWKV-7) stay dplr.
// CHECK: lina.recurrence @rwkv7 <decay = per_channel, update = dplr, key_dim
lina.recurrence @rwkv7 <decay = per_channel, update = dplr, key_dim = 16, value_dim = 16, heads = 2, value_heads = 2, dtype = bf16>
