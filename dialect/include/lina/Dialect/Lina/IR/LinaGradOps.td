//===- LinaGradOps.td - The backward of the chunkwise algorithm -*- tablegen -*-===//
//
// Part of lina. `lina.chunked_backward` and the tile ops that only the
// backward needs: adjoints of the forward's tile ops that are not forward
// ops themselves (a transposed solve, the gradient sides of a decay product,
// reductions), and the loads and accumulations of gradients. lina-chunk-
// backward derives one from a lina.chunked by reverse-mode differentiation of
// its body, so every spec gets its backward from its forward.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_GRAD_OPS_TD
#define LINA_GRAD_OPS_TD

defvar Lina_GradientAttr = Lina_Gradient;
defvar Lina_GateGradWrtAttr = Lina_GateGradWrt;
defvar Lina_ProductSideAttr = Lina_ProductSide;

def Lina_ChunkedBackwardOp : Lina_Op<"chunked_backward", [Symbol,
    IsolatedFromAbove, SingleBlock]> {
  let summary = "the gradient of a chunkwise algorithm, chunk by chunk";
  let description = [{
    The body runs once per chunk of `chunk_size` tokens, for every (sequence,
    value head), from the last chunk to the first. Its block arguments are
    the forward state before the chunk and the gradient of the loss with
    respect to the state after it (both key_dim x value_dim); `lina.yield`
    gives the gradient with respect to the state before it, which the chunk
    before receives (and, after the first chunk, is the initial state's
    gradient). `lina.load_output_grad` reads the chunk's gradient of `o`;
    `lina.accumulate` adds gradients of inputs. Rows past a partial chunk's
    length read as zero and are not accumulated. `placement`'s `state` says
    where the reverse scan keeps the state's gradient (lina-place-state); its
    other fields are the forward's.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, Lina_SpecAttr:$spec,
                       I64Attr:$chunk_size,
                       OptionalAttr<Lina_ScheduleAttr>:$schedule,
                       OptionalAttr<Lina_PlacementAttr>:$placement);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat =
      "$sym_name $spec `chunk_size` `(` $chunk_size `)` (`schedule` $schedule^)? "
      "(`placement` $placement^)? attr-dict-with-keyword $body";
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
}

def Lina_LoadOutputGradOp : Lina_TileOp<"load_output_grad", [Pure]> {
  let summary = "the current chunk of dL/do (chunk x value_dim)";
  let results = (outs Lina_TileType:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Lina_AccumulateOp : Lina_TileOp<"accumulate"> {
  let summary = "adds a chunk's gradient of an input to its buffer";
  let description = [{
    Per-token inputs take the chunk's valid rows; q and k add into the q/k
    head that the current value head reads, so grouped value heads sum. A
    per-head parameter (a fixed decay's `g`, `gate_a_log`, `gate_dt_bias`)
    takes the sum of all rows of the tile.
  }];
  let arguments = (ins Lina_GradientAttr:$operand, Lina_TileType:$value);
  let assemblyFormat = "$operand `,` $value attr-dict `:` type($value)";
  let hasVerifier = 1;
}

def Lina_MulOp : Lina_BinaryOp<"mul"> { let summary = "lhs . rhs, elementwise"; }

def Lina_RowSumOp : Lina_TileOp<"row_sum", [Pure]> {
  let summary = "the sum of each row: r x c -> r x 1";
  let arguments = (ins Lina_TileType:$input);
  let results = (outs Lina_TileType:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Lina_RowDotOp : Lina_TileOp<"row_dot", [Pure, AllTypesMatch<["lhs", "rhs"]>]> {
  let summary = "the inner product of each row of lhs with rhs's: r x c -> r x 1";
  let description = [{
    `row_sum(mul(lhs, rhs))` without the product's tile. lina-fuse-sums
    writes it for the gradients of row weights and decays, which the
    backward sums this way (a gate's gradient is the row sum of dy . y).
  }];
  let arguments = (ins Lina_TileType:$lhs, Lina_TileType:$rhs);
  let results = (outs Lina_TileType:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `->` type($result)";
  let hasVerifier = 1;
}

def Lina_SumOp : Lina_TileOp<"sum", [Pure, SameOperandsAndResultType,
    AttrSizedOperandSegments]> {
  let summary = "a sum of tiles and of elementwise products, elementwise";
  let description = [{
    One op for a tree of adds, subs and negs (lina-fuse-sums): the backward
    sums a value's gradient from every op that reads it, one add each. A
    term is a tile or the elementwise product of two (`%x * %y`), the
    terms of `added` added and those of `subtracted` subtracted; a gate's
    gradient sums many products, and a product term needs no tile of its
    own. `factors` gives each term's tiles, 1 or 2, the added terms' then
    the subtracted ones' (absent: every term is one tile). There are at
    least two terms and three tiles (two tiles are an add, a sub or a mul),
    or two subtracted tiles: with every term subtracted the sum is the
    negated sum of its terms (a gradient through negs, one pass instead of
    a neg each and an add).

        %s = lina.sum %a, %b * %c minus %d : <16x128>
        %n = lina.sum minus %a, %b : <16x16>
  }];
  let arguments = (ins Variadic<Lina_TileType>:$added,
                       Variadic<Lina_TileType>:$subtracted,
                       OptionalAttr<DenseI64ArrayAttr>:$factors);
  let results = (outs Lina_TileType:$result);
  let assemblyFormat =
      "custom<SumTerms>($added, $subtracted, $factors) attr-dict `:` "
      "type($result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// One term: `lhs`, or `lhs * rhs` where rhs is set.
    struct Term {
      mlir::Value lhs, rhs;
      bool subtracted = false;
    };
    /// The terms in order, the added ones first.
    llvm::SmallVector<Term, 8> getTerms();
  }];
}

def Lina_ColSumOp : Lina_TileOp<"col_sum", [Pure]> {
  let summary = "the sum of each column over all rows: r x c -> 1 x c";
  let arguments = (ins Lina_TileType:$input);
  let results = (outs Lina_TileType:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Lina_TransposeOp : Lina_TileOp<"transpose", [Pure]> {
  let summary = "x^T";
  let arguments = (ins Lina_TileType:$input);
  let results = (outs Lina_TileType:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Lina_AddToLastRowOp : Lina_TileOp<"add_to_last_row", [Pure,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "x with r (one row) added to the chunk's last valid row";
  let description = [{
    The adjoint of reading G_last, the cumulative gate at the chunk's end,
    which decay_state and decay_rows `to_end` do.
  }];
  let arguments = (ins Lina_TileType:$input, Lina_TileType:$row);
  let results = (outs Lina_TileType:$result);
  let assemblyFormat = "$input `,` $row attr-dict `:` type($input) `,` type($row)";
  let hasVerifier = 1;
}

def Lina_ReverseCumsumOp : Lina_UnaryOp<"reverse_cumsum"> {
  let summary = "cumulative sum up the rows from the last valid one";
  let description = [{
    The adjoint of lina.cumsum: y_i = sum_{j >= i} x_j over the valid rows
    (j > i with `exclusive`).
  }];
  let arguments = (ins Lina_TileType:$input, UnitAttr:$exclusive);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Lina_StraddleSumOp : Lina_TileOp<"straddle_sum", [Pure]> {
  let summary = "for each row t, the sum over the pairs that straddle it";
  let description = [{
    r x r -> r x 1: y_t = sum_{i >= t > j} M_ij - sum_{j >= t > i} M_ij over
    the valid rows. With M = dP . P for a decay product P whose two factors
    decay by the same cumulative gates G = cumsum(g), y is that product's
    gradient of g: only the pairs that straddle token t hold g_t in their
    exponent G_i - G_j. The same gradient as row sums less column sums under
    lina.cumsum's adjoint, summed without the terms that cancel there: the
    pairs near the diagonal, which decay least, never straddle a token, and
    their rounding in 16-bit products would swamp the decayed pairs that do.
  }];
  let arguments = (ins Lina_TileType:$input);
  let results = (outs Lina_TileType:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Lina_DecayProductGradOp : Lina_TileOp<"decay_product_grad", [Pure]> {
  let summary = "the gradient of one factor of a decay product";
  let description = [{
    For P = decay_product(x, y, Gx, Gy, mask) and its gradient dP:
    `lhs`: dx_ic = sum_j (mask . dP)_ij y_jc exp(Gx_ic - Gy_jc);
    `rhs`: dy_jc = sum_i (mask . dP)_ij x_ic exp(Gx_ic - Gy_jc),
    with `other` the factor not differentiated. The exponents are the
    forward's, pair by pair.
  }];
  let arguments = (ins Lina_ProductSideAttr:$side, Lina_TileType:$grad,
                       Lina_TileType:$other, Lina_TileType:$lhs_gates,
                       Lina_TileType:$rhs_gates, Lina_MaskAttr:$mask);
  let results = (outs Lina_TileType:$result);
  let assemblyFormat = [{
    $side $grad `,` $other `,` $lhs_gates `,` $rhs_gates $mask attr-dict `:`
    type($grad) `,` type($other) `,` type($lhs_gates) `,` type($rhs_gates) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Lina_TriSolveTransposedOp : Lina_TileOp<"tri_solve_transposed", [Pure,
    AllTypesMatch<["rhs", "result"]>]> {
  let summary = "(I + A)^-T X for strictly lower-triangular A";
  let description = [{
    The adjoint of lina.tri_solve: back substitution with the transposed,
    upper-triangular factor.
  }];
  let arguments = (ins Lina_TileType:$lower, Lina_TileType:$rhs);
  let results = (outs Lina_TileType:$result);
  let assemblyFormat = "$lower `,` $rhs attr-dict `:` type($lower) `,` type($rhs)";
  let hasVerifier = 1;
}

def Lina_StrictLowerOp : Lina_UnaryOp<"strict_lower"> {
  let summary = "the strictly lower-triangular part of a square tile";
  let arguments = (ins Lina_TileType:$input);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Lina_L2NormGradOp : Lina_TileOp<"l2norm_grad", [Pure,
    AllTypesMatch<["input", "grad", "result"]>]> {
  let summary = "the gradient through lina.l2norm";
  let description = [{
    With r_i = sqrt(|x_i|^2 + 1e-6) and y_i = x_i / r_i:
    dx_i = (dy_i - y_i (y_i . dy_i)) / r_i.
  }];
  let arguments = (ins Lina_TileType:$input, Lina_TileType:$grad);
  let results = (outs Lina_TileType:$result);
  let assemblyFormat = "$input `,` $grad attr-dict `:` type($result)";
}

def Lina_BetaGradOp : Lina_TileOp<"beta_grad", [Pure,
    AllTypesMatch<["input", "grad", "result"]>]> {
  let summary = "the gradient through lina.beta, to its logit";
  let arguments = (ins Lina_BetaSourceAttr:$source, Lina_TileType:$input,
                       Lina_TileType:$grad);
  let results = (outs Lina_TileType:$result);
  let assemblyFormat = "$source $input `,` $grad attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Lina_GateGradOp : Lina_TileOp<"gate_grad", [Pure,
    AllTypesMatch<["input", "grad", "result"]>]> {
  let summary = "the gradient through lina.gate";
  let description = [{
    With `input` the pre-activation x and `grad` dL/dg, element by element:
    `input` gives dL/dx; `a_log` gives dL/dg times dg/dA_log and `dt_bias`
    dL/dg times dg/d dt_bias, which lina.accumulate sums into the value
    head's parameters. Rows past the chunk's length are zero.
  }];
  let arguments = (ins Lina_GateGradWrtAttr:$wrt, Lina_GateSourceAttr:$source,
                       Lina_TileType:$input, Lina_TileType:$grad,
                       OptionalAttr<F64Attr>:$lower_bound);
  let results = (outs Lina_TileType:$result);
  let assemblyFormat = "$wrt $source $input `,` $grad attr-dict `:` type($result)";
  let hasVerifier = 1;
}

#endif // LINA_GRAD_OPS_TD
