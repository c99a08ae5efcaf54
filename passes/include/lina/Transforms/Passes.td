//===- Passes.td - lina passes -----------------------------*- tablegen -*-===//
//
// Part of lina. Pass options are the autotuner's knobs.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TRANSFORMS_PASSES_TD
#define LINA_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def LinaSpecialize : Pass<"lina-specialize", "mlir::ModuleOp"> {
  let summary = "Rewrite a spec into the cheapest form that computes it";
  let description = [{
    Recognises sub-forms that need less work: a dplr spec whose low-rank
    vectors are tied to k (a = -(D k), b = beta k) is a delta rule (two chunk x
    chunk products instead of four); a dplr spec with a zero low-rank vector
    is a pure decay form. See docs/passes.md for the list.
  }];
  let dependentDialects = ["::lina::LinaDialect"];
}

def LinaChunk : Pass<"lina-chunk", "mlir::ModuleOp"> {
  let summary = "Rewrite each lina.recurrence into its chunkwise algorithm";
  let description = [{
    Replaces `lina.recurrence` with `lina.chunked`, whose body computes one
    chunk: cumulative log gates, the masked intra-chunk products with decay
    ratios, the UT transform (a triangular solve) for delta and dplr, the
    output from the state *before* the chunk plus the intra-chunk part, and the
    state update. A recurrence whose chunk size lina-choose-schedule recorded
    is cut at that size (and keeps the recorded schedule) unless
    `chunk-size` is given.
  }];
  let dependentDialects = ["::lina::LinaDialect"];
  let options = [
    Option<"chunkSize", "chunk-size", "int64_t", /*default=*/"64",
           "Tokens per chunk: 16, 32, 64 or 128">,
    Option<"testReadUpdatedState", "test-read-updated-state", "bool",
           /*default=*/"false",
           "Test only: compute the output from the state after the chunk "
           "(a known-wrong order, to prove the numerical tests catch it)">,
  ];
}

def LinaChunkBackward : Pass<"lina-chunk-backward", "mlir::ModuleOp"> {
  let summary = "Derive each lina.chunked's backward by differentiating it";
  let description = [{
    Adds, after each `lina.chunked @f`, a `lina.chunked_backward @f_backward`
    that walks the chunks last to first: it recomputes the chunk's forward
    tile ops from its inputs and the state before it, then emits every op's
    adjoint in reverse order (reverse-mode differentiation of the body), from
    the gradient of the output and of the state after the chunk to the
    gradients of the chunk's inputs (`lina.accumulate`) and of the state
    before it (`lina.yield`).
  }];
  let dependentDialects = ["::lina::LinaDialect"];
}

def LinaFuseSums : Pass<"lina-fuse-sums", "mlir::ModuleOp"> {
  let summary = "Fold a backward's sums into one op each";
  let description = [{
    In each `lina.chunked_backward`, replaces a tree of `lina.add`,
    `lina.sub` and `lina.neg` whose inner results have no other reader with
    one `lina.sum` of its leaves (an add with a negated operand becomes a
    sub; a tree whose leaves are all negated, or a neg at its top, a sum
    with every term subtracted), and `lina.row_sum` of a `lina.mul` read nowhere else with
    `lina.row_dot`; a `lina.row_dot` of a `lina.decay_state` read nowhere
    else becomes the `lina.decay_state` of the row dot of the undecayed state
    (each row's decay is one factor). Differentiation sums a value's gradient from each of its
    readers, an add at a time, and takes a gate's gradient as the row sum of
    a product: each such op is a pass over a tile, and on the GPU a
    shared-memory tile and a barrier, which the fused op saves. The forward
    is left as written (its kernels read its own ops' patterns).
  }];
  let dependentDialects = ["::lina::LinaDialect"];
}

def LinaSolveResidual : Pass<"lina-solve-residual", "mlir::ModuleOp"> {
  let summary = "Solve a delta chunk's residual once instead of its two terms";
  let description = [{
    In each `lina.chunked` whose schedule asks for warpgroup products
    (`mma = warpgroup`), rewrites the delta rule's new values
    `U = tri_solve(A, X) - tri_solve(A, Y) S` as `tri_solve(A, X - Y S)`:
    the same values by linearity (T X - (T Y) S = T (X - Y S) with T = (I +
    A)^-1), with one solve, of the residual the state leaves. A scan that
    walks the chunks then applies T, prepared a chunk ahead from A alone, as
    one product per chunk, and keeps Y S and X - Y S in registers. The
    split strategy's prepare kernel solves before the scan, where the
    state is not known, so other schedules are left as they are. A DPLR
    chunk's values are the sum `tri_solve(A, Y) S + tri_solve(A, L V)` (Y
    its decayed `a`, L its low-rank scores of k): they become
    `tri_solve(A, Y S + L V)` the same way. The two solves must share A,
    read the state as the product's right operand and have no other reader.
  }];
  let dependentDialects = ["::lina::LinaDialect"];
}

def LinaSchedule : Pass<"lina-schedule", "mlir::ModuleOp"> {
  let summary = "Map each lina.chunked onto CTAs: value tile, warps, strategy";
  let description = [{
    Decides how the chunked program runs on the GPU and records it on the op
    as its `#lina.schedule` (value tile, warps, strategy and the scans'
    options; a lina.chunked_backward's value tile and warps), after checking
    that the choice is valid for the spec: tile-v divides value_dim and is a multiple of
    8 (tensor-core tiles), key_dim and the chunk size are multiples of 16.
    `fused` runs one CTA per (sequence, value head, value tile) over all
    chunks with the state on chip; `materialize` writes every chunk's starting
    state and computes the outputs chunk-parallel. These options are the
    autotuner's knobs. Given none, a schedule the op already carries (the
    one lina-choose-schedule picked, through lina-chunk) stays.
  }];
  let dependentDialects = ["::lina::LinaDialect"];
  let options = [
    Option<"tileV", "tile-v", "int64_t", /*default=*/"64",
           "Value columns per CTA (divides value_dim)">,
    Option<"warps", "warps", "int64_t", /*default=*/"4",
           "Warps per CTA: 1, 2, 4, 8 or 16">,
    Option<"strategy", "strategy", "std::string", /*default=*/"\"fused\"",
           "fused, materialize or split">,
    Option<"prefetch", "prefetch", "bool", /*default=*/"false",
           "Load the next chunk's tiles into registers while computing this "
           "one (the kernels that walk the chunks)">,
    Option<"sharedState", "shared-state", "bool", /*default=*/"false",
           "Keep the state in shared memory even where it fits in registers "
           "(the kernels that walk the chunks; for comparison)">,
    Option<"directDecay", "direct-decay", "bool", /*default=*/"false",
           "Per-channel decay products summed directly, exponential by "
           "exponential, instead of factored through each channel's "
           "midpoint on the tensor cores (for comparison)">,
    Option<"twoCTAs", "two-ctas", "bool", /*default=*/"false",
           "The kernels that walk the chunks ask for two CTAs a "
           "multiprocessor (__launch_bounds__(threads, 2)) where their "
           "shared memory allows two">,
    Option<"segments", "segments", "int64_t", /*default=*/"1",
           "Sequences run as this many segments at once, combined after "
           "the scan (split strategy, additive rules with a decay; "
           "Segments.cuh)">,
    Option<"mma", "mma", "std::string", /*default=*/"\"warp\"",
           "The scan's matrix products: warp (mma.sync) or warpgroup "
           "(Hopper's warpgroup products, the kernels printed from the "
           "chunk's ops: 64-token chunks, a warpgroup for each 64 value "
           "columns; sm_90a)">,
  ];
}

def LinaCutState : Pass<"lina-cut-state", "mlir::ModuleOp"> {
  let summary = "Cut each split lina.chunked, and a backward's two scans, at "
                "the state: what the prepare kernels store for the scans";
  let description = [{
    For a lina.chunked that lina-schedule gave the split strategy, decides
    which values a chunk-parallel prepare kernel computes and stores for the
    sequential scan, and records it on the ops that make them:
    `lina.cut = "stored"` (products, solves, norms and row decays with the
    chunk's tokens as rows and off the state's path), `lina.cut = "last_row"`
    (gate sums the scan needs only to decay the state: their last row). The
    rest, loads and elementwise work, the scan redoes. The CUDA emitter lays
    the workspace out from the record. Other strategies keep no record.

    A module with a lina.chunked_backward is a backward's: its two scans
    are cut alike, whatever the forward's strategy. The states scan runs
    what the lina.chunked's yield needs, carrying the state; the reverse
    scan what the lina.chunked_backward's yield needs, carrying the state's
    gradient (its last argument).
  }];
  let dependentDialects = ["::lina::LinaDialect"];
}

#endif // LINA_TRANSFORMS_PASSES_TD
