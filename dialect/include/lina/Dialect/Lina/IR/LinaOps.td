//===- LinaOps.td - Ops of the lina dialect ----------------*- tablegen -*-===//
//
// Part of lina. Two levels: the spec (`lina.recurrence`) and the chunkwise
// algorithm (`lina.chunked` holding tile ops). Tile ops are the vocabulary that
// every backend implements once: the float64 CPU executor and the CUDA device
// library.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_OPS_TD
#define LINA_OPS_TD

include "lina/Dialect/Lina/IR/LinaAttrs.td"
include "lina/Dialect/Lina/IR/LinaTypes.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

// Enum arguments print as bare keywords (`lina.load q`, `strict`).
defvar Lina_OperandAttr = Lina_Operand;
defvar Lina_MaskAttr = Lina_Mask;
defvar Lina_GateSourceAttr = Lina_GateSource;
defvar Lina_BetaSourceAttr = Lina_BetaSource;

//===----------------------------------------------------------------------===//
// Spec level
//===----------------------------------------------------------------------===//

def Lina_RecurrenceOp : Lina_Op<"recurrence", [Symbol]> {
  let summary = "a linear-attention recurrence to compile";
  let description = [{
    The spec of one recurrence: `S_t = (D_t + b_t a_t^T) S_{t-1} + w_t k_t v_t^T`,
    `o_t = S_t^T (scale q_t)`. A spec file is a module of these.

    ```mlir
    lina.recurrence @gdn <decay = scalar, update = delta, beta = given,
        qk_l2norm = true, key_dim = 128, value_dim = 128, heads = 16,
        value_heads = 16, dtype = bf16, initial_state = true, final_state = true>
    ```

    lina-choose-schedule records the schedule it picks for a call (the
    sequences and GPU it was told of) as the op's `chunk_size` and
    `schedule`, which lina-chunk and lina-schedule then follow:

    ```mlir
    lina.recurrence @gdn <...> chunk_size(64)
        schedule <tile_v = 128, warps = 8, prefetch = true, mma = warpgroup>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, Lina_SpecAttr:$spec,
                       OptionalAttr<I64Attr>:$chunk_size,
                       OptionalAttr<Lina_ScheduleAttr>:$schedule);
  let assemblyFormat =
      "$sym_name $spec (`chunk_size` `(` $chunk_size^ `)`)? "
      "(`schedule` $schedule^)? attr-dict";
  let builders = [
    OpBuilder<(ins "::llvm::StringRef":$sym_name, "SpecAttr":$spec), [{
      build($_builder, $_state, $_builder.getStringAttr(sym_name), spec,
            ::mlir::IntegerAttr(), ScheduleAttr());
    }]>
  ];
  let hasVerifier = 1;
}

def Lina_ChunkedOp : Lina_Op<"chunked", [Symbol, IsolatedFromAbove,
    SingleBlock]> {
  let summary = "the chunkwise algorithm of a recurrence";
  let description = [{
    The body runs once per chunk of `chunk_size` tokens, for every (sequence,
    value head), in token order. Its block argument is the state before the
    chunk (key_dim x value_dim); `lina.yield` gives the state after it. The
    last chunk of a sequence may be partial: rows past its length read as zero
    and are not stored.
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

def Lina_YieldOp : Lina_Op<"yield", [Pure, Terminator,
    ParentOneOf<["ChunkedOp", "ChunkedBackwardOp"]>]> {
  let summary = "the state after the chunk (its gradient before, backward)";
  let arguments = (ins Lina_TileType:$state);
  let assemblyFormat = "$state attr-dict `:` type($state)";
}

//===----------------------------------------------------------------------===//
// Tile level
//===----------------------------------------------------------------------===//

class Lina_TileOp<string mnemonic, list<Trait> traits = []>
    : Lina_Op<mnemonic, !listconcat(traits,
          [ParentOneOf<["ChunkedOp", "ChunkedBackwardOp"]>])>;

def Lina_LoadOp : Lina_TileOp<"load", [Pure]> {
  let summary = "the current chunk of an input tensor";
  let description = [{
    Rows are the chunk's tokens, columns the operand's channels (1 for a
    scalar gate or beta). `q`, `k` read the q/k head of the current value head.
    With a fixed decay, `g` puts the head's constant log gate in every valid
    row.
  }];
  let arguments = (ins Lina_OperandAttr:$operand);
  let results = (outs Lina_TileType:$result);
  let assemblyFormat = "$operand attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Lina_StoreOp : Lina_TileOp<"store"> {
  let summary = "writes the valid rows of the chunk's output";
  let arguments = (ins Lina_OperandAttr:$operand, Lina_TileType:$value);
  let assemblyFormat = "$operand `,` $value attr-dict `:` type($value)";
  let hasVerifier = 1;
}

def Lina_ZerosOp : Lina_TileOp<"zeros", [Pure]> {
  let summary = "a tile of zeros (the log gates of a form without decay)";
  let results = (outs Lina_TileType:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

class Lina_UnaryOp<string mnemonic, list<Trait> traits = []>
    : Lina_TileOp<mnemonic, !listconcat(traits, [Pure, SameOperandsAndResultType])> {
  let results = (outs Lina_TileType:$result);
}

def Lina_L2NormOp : Lina_UnaryOp<"l2norm"> {
  let summary = "x_i / sqrt(|x_i|^2 + 1e-6) per row";
  let arguments = (ins Lina_TileType:$input);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Lina_ScaleOp : Lina_UnaryOp<"scale"> {
  let summary = "multiplies every element by a constant";
  let arguments = (ins Lina_TileType:$input, F64Attr:$factor);
  let assemblyFormat = "$input `by` $factor attr-dict `:` type($result)";
}

def Lina_NegOp : Lina_UnaryOp<"neg"> {
  let summary = "-x";
  let arguments = (ins Lina_TileType:$input);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Lina_GateOp : Lina_UnaryOp<"gate"> {
  let summary = "log gate from its pre-activation";
  let description = [{
    `softplus`: g = -exp(A_log[h]) * softplus(x + dt_bias);
    `lower_bound`: g = lower_bound * sigmoid(exp(A_log[h]) * (x + dt_bias)),
    with A_log and dt_bias the parameters of the current value head.
  }];
  let arguments = (ins Lina_GateSourceAttr:$source, Lina_TileType:$input,
                       OptionalAttr<F64Attr>:$lower_bound);
  let assemblyFormat = "$source $input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Lina_BetaOp : Lina_UnaryOp<"beta"> {
  let summary = "beta from its logit: sigmoid or 2 sigmoid";
  let arguments = (ins Lina_BetaSourceAttr:$source, Lina_TileType:$input);
  let assemblyFormat = "$source $input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Lina_CumsumOp : Lina_UnaryOp<"cumsum"> {
  let summary = "cumulative sum down the rows (inclusive, or exclusive)";
  let arguments = (ins Lina_TileType:$input, UnitAttr:$exclusive);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

class Lina_BinaryOp<string mnemonic>
    : Lina_TileOp<mnemonic, [Pure, SameOperandsAndResultType]> {
  let arguments = (ins Lina_TileType:$lhs, Lina_TileType:$rhs);
  let results = (outs Lina_TileType:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}
def Lina_AddOp : Lina_BinaryOp<"add"> { let summary = "lhs + rhs"; }
def Lina_SubOp : Lina_BinaryOp<"sub"> { let summary = "lhs - rhs"; }

def Lina_ScaleRowsOp : Lina_TileOp<"scale_rows", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "row i of x times w_i (w has one column)";
  let arguments = (ins Lina_TileType:$input, Lina_TileType:$weights);
  let results = (outs Lina_TileType:$result);
  let assemblyFormat = "$input `,` $weights attr-dict `:` type($input) `,` type($weights)";
  let hasVerifier = 1;
}

def Lina_DecayRowsOp : Lina_TileOp<"decay_rows", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "x_i . exp(G_i), or x_i . exp(G_last - G_i) with `to_end`";
  let description = [{
    `G` has one column (broadcast over channels) or as many as `x`. With
    `to_end` the exponent is the gate from row i to the chunk's last valid row,
    never positive, so the result cannot overflow.
  }];
  let arguments = (ins Lina_TileType:$input, Lina_TileType:$log_gates,
                       UnitAttr:$to_end);
  let results = (outs Lina_TileType:$result);
  let assemblyFormat = "$input `,` $log_gates attr-dict `:` type($input) `,` type($log_gates)";
  let hasVerifier = 1;
}

def Lina_DecayStateOp : Lina_TileOp<"decay_state", [Pure, AllTypesMatch<["state", "result"]>]> {
  let summary = "rows of the state times exp(G_last): the decay across a chunk";
  let arguments = (ins Lina_TileType:$state, Lina_TileType:$log_gates);
  let results = (outs Lina_TileType:$result);
  let assemblyFormat = "$state `,` $log_gates attr-dict `:` type($state) `,` type($log_gates)";
  let hasVerifier = 1;
}

def Lina_DecayProductOp : Lina_TileOp<"decay_product", [Pure]> {
  let summary = "masked P_ij = sum_c x_ic y_jc exp(Gx_ic - Gy_jc)";
  let description = [{
    The chunk x chunk product with decay ratios between token j and token i,
    kept for j <= i (`inclusive`) or j < i (`strict`), zero elsewhere. The
    exponent is a gate difference over a span inside the chunk, so a backend
    can keep it in range by referencing a point inside the chunk.
  }];
  let arguments = (ins Lina_TileType:$lhs, Lina_TileType:$rhs,
                       Lina_TileType:$lhs_gates, Lina_TileType:$rhs_gates,
                       Lina_MaskAttr:$mask);
  let results = (outs Lina_TileType:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $lhs_gates `,` $rhs_gates $mask attr-dict `:`
    type($lhs) `,` type($rhs) `,` type($lhs_gates) `,` type($rhs_gates) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Lina_TriSolveOp : Lina_TileOp<"tri_solve", [Pure, AllTypesMatch<["rhs", "result"]>]> {
  let summary = "(I + A)^-1 X for strictly lower-triangular A: the UT transform";
  let arguments = (ins Lina_TileType:$lower, Lina_TileType:$rhs);
  let results = (outs Lina_TileType:$result);
  let assemblyFormat = "$lower `,` $rhs attr-dict `:` type($lower) `,` type($rhs)";
  let hasVerifier = 1;
}

def Lina_MatmulOp : Lina_TileOp<"matmul", [Pure]> {
  let summary = "lhs * rhs, or lhs^T * rhs with `transpose_lhs`";
  let arguments = (ins Lina_TileType:$lhs, Lina_TileType:$rhs,
                       UnitAttr:$transpose_lhs);
  let results = (outs Lina_TileType:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let hasVerifier = 1;
}

include "lina/Dialect/Lina/IR/LinaGradOps.td"

#endif // LINA_OPS_TD
