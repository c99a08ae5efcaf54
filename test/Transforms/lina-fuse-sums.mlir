// RUN: lina-opt %s -split-input-file -lina-fuse-sums | FileCheck %s
// RUN: lina-opt %s -split-input-file -lina-fuse-sums | lina-opt -split-input-file -lina-fuse-sums | FileCheck %s --check-prefix=TWICE

// A tree of adds, subs and negs whose inner results have no other reader
// becomes one sum of its leaves: a sub's right side and a neg's input are
// subtracted. A row sum of a product read nowhere else is a row dot.
// CHECK-LABEL: lina.chunked_backward @tree
// CHECK-NEXT: ^bb0(%[[S:.*]]: !lina.tile<16x8>, %[[DS:.*]]: !lina.tile<16x8>):
// CHECK: %[[K:.*]] = lina.load k : <32x16>
// CHECK: %[[Q:.*]] = lina.load q : <32x16>
// CHECK: %[[V:.*]] = lina.load v : <32x8>
// CHECK: %[[DO:.*]] = lina.load_output_grad : <32x8>
// CHECK-NEXT: %[[DOT:.*]] = lina.row_dot %[[DO]], %[[V]] : <32x8> -> <32x1>
// CHECK-NEXT: %[[SUM:.*]] = lina.sum %[[K]], %[[K]] minus %[[Q]] : <32x16>
// CHECK-NEXT: lina.accumulate q, %[[SUM]] : <32x16>
// CHECK-NEXT: lina.accumulate beta, %[[DOT]] : <32x1>
// CHECK-NEXT: %[[DS0:.*]] = lina.sum %[[S]], %[[DS]], %[[S]] : <16x8>
// CHECK-NEXT: lina.yield %[[DS0]] : <16x8>
// TWICE-LABEL: lina.chunked_backward @tree
// TWICE: lina.sum %{{.*}}, %{{.*}} minus %{{.*}} : <32x16>
// TWICE: lina.sum %{{.*}}, %{{.*}}, %{{.*}} : <16x8>
lina.chunked_backward @tree <decay = none, update = delta, beta = given, key_dim = 16, value_dim = 8, heads = 1, value_heads = 1, dtype = bf16> chunk_size(32) {
^bb0(%s: !lina.tile<16x8>, %ds: !lina.tile<16x8>):
  %k = lina.load k : <32x16>
  %q = lina.load q : <32x16>
  %v = lina.load v : <32x8>
  %do = lina.load_output_grad : <32x8>
  %p = lina.mul %do, %v : <32x8>
  %dot = lina.row_sum %p : <32x8> -> <32x1>
  %nq = lina.neg %q : <32x16>
  %a = lina.add %k, %nq : <32x16>
  %b = lina.add %a, %k : <32x16>
  lina.accumulate q, %b : <32x16>
  lina.accumulate beta, %dot : <32x1>
  %c = lina.add %s, %ds : <16x8>
  %d = lina.add %c, %s : <16x8>
  lina.yield %d : <16x8>
}

// -----

// A value with another reader stays a leaf: its add is kept for that
// reader, and so is a product another op reads. Two leaves with a neg
// between them are a sub; two without one are left as written.
// CHECK-LABEL: lina.chunked_backward @shared
// CHECK: %[[K:.*]] = lina.load k : <32x16>
// CHECK: %[[Q:.*]] = lina.load q : <32x16>
// CHECK: %[[A:.*]] = lina.add %[[K]], %[[Q]] : <32x16>
// CHECK-NEXT: %[[B:.*]] = lina.sum %[[A]], %[[K]], %[[Q]], %[[A]] : <32x16>
// CHECK-NEXT: lina.accumulate k, %[[A]]
// CHECK-NEXT: lina.accumulate q, %[[B]]
// CHECK-NEXT: %[[P:.*]] = lina.mul %[[K]], %[[Q]] : <32x16>
// CHECK-NEXT: %[[R:.*]] = lina.row_sum %[[P]]
// CHECK-NEXT: %[[BETA:.*]] = lina.load beta
// CHECK-NEXT: %[[D:.*]] = lina.sub %[[R]], %[[BETA]] : <32x1>
// CHECK-NEXT: lina.accumulate beta, %[[D]]
// CHECK-NEXT: lina.accumulate v, %{{.*}} : <32x16>
// CHECK-NOT: lina.neg
// CHECK: lina.add %{{.*}}, %{{.*}} : <16x16>
lina.chunked_backward @shared <decay = none, update = delta, beta = given, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16> chunk_size(32) {
^bb0(%s: !lina.tile<16x16>, %ds: !lina.tile<16x16>):
  %k = lina.load k : <32x16>
  %q = lina.load q : <32x16>
  %a = lina.add %k, %q : <32x16>
  %b = lina.add %a, %k : <32x16>
  %c = lina.add %b, %q : <32x16>
  %d = lina.add %c, %a : <32x16>
  lina.accumulate k, %a : <32x16>
  lina.accumulate q, %d : <32x16>
  %p = lina.mul %k, %q : <32x16>
  %r = lina.row_sum %p : <32x16> -> <32x1>
  %beta = lina.load beta : <32x1>
  %n = lina.neg %beta : <32x1>
  %e = lina.add %r, %n : <32x1>
  lina.accumulate beta, %e : <32x1>
  lina.accumulate v, %p : <32x16>
  %y = lina.add %s, %ds : <16x16>
  lina.yield %y : <16x16>
}

// -----

// A product that only the sum reads is one of its terms, `%x * %y`, and its
// tile is never made; a product with another reader stays a tile. A
// product makes a two-leaf add a sum.
// CHECK-LABEL: lina.chunked_backward @products
// CHECK: %[[K:.*]] = lina.load k : <32x16>
// CHECK-NEXT: %[[Q:.*]] = lina.load q : <32x16>
// CHECK-NEXT: %[[P:.*]] = lina.mul %[[Q]], %[[Q]] : <32x16>
// CHECK-NEXT: %[[A:.*]] = lina.sum %[[K]], %[[K]] * %[[Q]] : <32x16>
// CHECK-NEXT: lina.accumulate k, %[[A]] : <32x16>
// CHECK-NEXT: %[[C:.*]] = lina.sum %[[Q]], %[[P]] minus %[[K]] * %[[K]], %[[Q]] : <32x16>
// CHECK-NEXT: lina.accumulate q, %[[C]] : <32x16>
// CHECK-NEXT: lina.row_sum %[[P]] : <32x16> -> <32x1>
// CHECK-NOT: lina.mul
// TWICE-LABEL: lina.chunked_backward @products
// TWICE: lina.sum %{{.*}}, %{{.*}} * %{{.*}} : <32x16>
// TWICE: lina.sum %{{.*}}, %{{.*}} minus %{{.*}} * %{{.*}}, %{{.*}} : <32x16>
lina.chunked_backward @products <decay = none, update = delta, beta = given, key_dim = 16, value_dim = 8, heads = 1, value_heads = 1, dtype = bf16> chunk_size(32) {
^bb0(%s: !lina.tile<16x8>, %ds: !lina.tile<16x8>):
  %k = lina.load k : <32x16>
  %q = lina.load q : <32x16>
  %m = lina.mul %k, %q : <32x16>
  %p = lina.mul %q, %q : <32x16>
  %n = lina.mul %k, %k : <32x16>
  %a = lina.add %k, %m : <32x16>
  lina.accumulate k, %a : <32x16>
  %b = lina.add %q, %p : <32x16>
  %c = lina.sub %b, %n : <32x16>
  %d = lina.sub %c, %q : <32x16>
  lina.accumulate q, %d : <32x16>
  %r = lina.row_sum %p : <32x16> -> <32x1>
  lina.accumulate beta, %r : <32x1>
  lina.yield %ds : <16x8>
}

// -----

// The forward is left as written: its kernels read its own ops' patterns
// (the state's update S + K^T V among them).
// CHECK-LABEL: lina.chunked @forward
// CHECK: lina.add
// CHECK: lina.add
lina.chunked @forward <decay = none, update = additive, key_dim = 16, value_dim = 8, heads = 1, value_heads = 1, dtype = bf16> chunk_size(32) {
^bb0(%s: !lina.tile<16x8>):
  %q = lina.load q : <32x16>
  %k = lina.load k : <32x16>
  %v = lina.load v : <32x8>
  %z = lina.zeros : <32x1>
  %p = lina.decay_product %q, %k, %z, %z inclusive : <32x16>, <32x16>, <32x1>, <32x1> -> <32x32>
  %pv = lina.matmul %p, %v : <32x32>, <32x8> -> <32x8>
  %qs = lina.matmul %q, %s : <32x16>, <16x8> -> <32x8>
  %o = lina.add %pv, %qs : <32x8>
  %o2 = lina.add %o, %pv : <32x8>
  lina.store o, %o2 : <32x8>
  %u = lina.matmul %k, %v {transpose_lhs} : <32x16>, <32x8> -> <16x8>
  %s2 = lina.add %s, %u : <16x8>
  lina.yield %s2 : <16x8>
}

// -----

// A row dot of a decayed state read nowhere else is the row dot of the
// state, decayed: a 16 x 1 tile instead of a 16 x 8 one. Per-channel gates
// decay each row by its own factor, which the row dot leaves a row apart.
// A decayed state with another reader stays as written.
// CHECK-LABEL: lina.chunked_backward @decayed
// CHECK-NEXT: ^bb0(%[[S:.*]]: !lina.tile<16x8>, %[[DS:.*]]: !lina.tile<16x8>):
// CHECK: %[[G:.*]] = lina.load g : <32x16>
// CHECK-NEXT: %[[DOT:.*]] = lina.row_dot %[[DS]], %[[S]] : <16x8> -> <16x1>
// CHECK-NEXT: %[[DEC:.*]] = lina.decay_state %[[DOT]], %[[G]] : <16x1>, <32x16>
// CHECK-NEXT: %[[KEPT:.*]] = lina.decay_state %[[DS]], %[[G]] : <16x8>, <32x16>
// CHECK-NEXT: %[[DOT2:.*]] = lina.row_dot %[[KEPT]], %[[S]] : <16x8> -> <16x1>
// CHECK-NEXT: %[[SUM:.*]] = lina.add %[[DEC]], %[[DOT2]] : <16x1>
// CHECK-NOT: lina.decay_state %[[S]]
// CHECK: lina.yield %[[KEPT]] : <16x8>
lina.chunked_backward @decayed <decay = per_channel, update = additive, key_dim = 16, value_dim = 8, heads = 1, value_heads = 1, dtype = bf16> chunk_size(32) {
^bb0(%s: !lina.tile<16x8>, %ds: !lina.tile<16x8>):
  %g = lina.load g : <32x16>
  %d = lina.decay_state %s, %g : <16x8>, <32x16>
  %dot = lina.row_dot %ds, %d : <16x8> -> <16x1>
  %kept = lina.decay_state %ds, %g : <16x8>, <32x16>
  %dot2 = lina.row_dot %kept, %s : <16x8> -> <16x1>
  %sum = lina.add %dot, %dot2 : <16x1>
  %t = lina.transpose %sum : <16x1> -> <1x16>
  %z = lina.zeros : <32x16>
  %dg = lina.add_to_last_row %z, %t : <32x16>, <1x16>
  lina.accumulate g, %dg : <32x16>
  lina.yield %kept : <16x8>
}

// -----

// Leaves that are all negated (the gradient through two negs, as the UT
// transform's backward writes it) are one sum with every term subtracted,
// not two negs and an add; a neg at the top of a tree alike. A neg of a
// value another op reads stays a neg.
// CHECK-LABEL: lina.chunked_backward @negated
// CHECK: %[[K:.*]] = lina.load k : <32x16>
// CHECK: %[[Q:.*]] = lina.load q : <32x16>
// CHECK: %[[V:.*]] = lina.load v : <32x16>
// CHECK: %[[SL:.*]] = lina.strict_lower %{{.*}} : <32x32>
// CHECK-NEXT: %[[SL2:.*]] = lina.strict_lower %{{.*}} : <32x32>
// CHECK-NEXT: %[[BOTH:.*]] = lina.sum minus %[[SL]], %[[SL2]] : <32x32>
// CHECK-NEXT: lina.row_sum %[[BOTH]]
// CHECK-NEXT: lina.accumulate beta, %{{.*}}
// CHECK-NEXT: %[[TOP:.*]] = lina.sum minus %[[K]], %[[Q]], %[[V]] : <32x16>
// CHECK-NEXT: lina.accumulate q, %[[TOP]] : <32x16>
// CHECK-NEXT: %[[KEPT:.*]] = lina.add %[[K]], %[[V]] : <32x16>
// CHECK-NEXT: %[[NEG:.*]] = lina.neg %[[KEPT]] : <32x16>
// CHECK-NEXT: lina.accumulate k, %[[KEPT]] : <32x16>
// CHECK-NEXT: lina.accumulate v, %[[NEG]] : <32x16>
// TWICE-LABEL: lina.chunked_backward @negated
// TWICE: lina.sum minus %{{.*}}, %{{.*}} : <32x32>
// TWICE: lina.sum minus %{{.*}}, %{{.*}}, %{{.*}} : <32x16>
lina.chunked_backward @negated <decay = none, update = delta, beta = given, key_dim = 16, value_dim = 16, heads = 1, value_heads = 1, dtype = bf16> chunk_size(32) {
^bb0(%s: !lina.tile<16x16>, %ds: !lina.tile<16x16>):
  %k = lina.load k : <32x16>
  %q = lina.load q : <32x16>
  %v = lina.load v : <32x16>
  %qt = lina.transpose %q : <32x16> -> <16x32>
  %kq = lina.matmul %k, %qt : <32x16>, <16x32> -> <32x32>
  %l = lina.strict_lower %kq : <32x32>
  %l2 = lina.strict_lower %l : <32x32>
  %n = lina.neg %l : <32x32>
  %n2 = lina.neg %l2 : <32x32>
  %a = lina.add %n, %n2 : <32x32>
  %r = lina.row_sum %a : <32x32> -> <32x1>
  lina.accumulate beta, %r : <32x1>
  %kq2 = lina.add %k, %q : <32x16>
  %t = lina.add %kq2, %v : <32x16>
  %nt = lina.neg %t : <32x16>
  lina.accumulate q, %nt : <32x16>
  %kept = lina.add %k, %v : <32x16>
  %nk = lina.neg %kept : <32x16>
  lina.accumulate k, %kept : <32x16>
  lina.accumulate v, %nk : <32x16>
  lina.yield %ds : <16x16>
}
