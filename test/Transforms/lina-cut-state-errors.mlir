// RUN: lina-opt %s -split-input-file -verify-diagnostics

// lina-cut-state's record is checked where it is read back.
lina.chunked @gla <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> chunk_size(16) {
^bb0(%s: !lina.tile<16x16>):
  %k = lina.load k : <16x16>
  // expected-error @+1 {{'lina.cut' must be "stored" or "last_row", got "sometimes"}}
  %n = lina.l2norm %k {lina.cut = "sometimes"} : <16x16>
  lina.yield %s : <16x16>
}

// -----

lina.chunked @gla <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> chunk_size(16) {
^bb0(%s: !lina.tile<16x16>):
  %k = lina.load k : <16x16>
  // expected-error @+1 {{unknown lina attribute 'lina.cuts'}}
  %n = lina.l2norm %k {lina.cuts = "stored"} : <16x16>
  lina.yield %s : <16x16>
}

// -----

// expected-error @+1 {{'lina.cut' belongs on an op of a lina.chunked or lina.chunked_backward body that makes one tile}}
lina.recurrence @gla <decay = none, update = additive, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16, initial_state = true, final_state = true> {lina.cut = "stored"}
