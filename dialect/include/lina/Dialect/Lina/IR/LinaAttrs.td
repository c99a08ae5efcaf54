//===- LinaAttrs.td - Attributes of the lina dialect -------*- tablegen -*-===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_ATTRS_TD
#define LINA_ATTRS_TD

include "lina/Dialect/Lina/IR/LinaDialect.td"
include "lina/Dialect/Lina/IR/LinaEnums.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

class Lina_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Lina_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

// An enum field; SpecAttrSyntax.cpp parses it as a bare keyword and, for a
// wrong one, lists the allowed spellings.
class Lina_EnumField<EnumAttrInfo info, string default = "">
    : AttrOrTypeParameter<info.cppNamespace # "::" # info.className,
                          info.summary> {
  let defaultValue = !if(!empty(default), ?,
                         info.cppNamespace # "::" # info.className # "::" # default);
}

def Lina_SpecAttr : Lina_Attr<"Spec", "spec"> {
  let summary = "one linear-attention recurrence";
  let description = [{
    Every field of the generic recurrence. Fields may appear in any order;
    those with defaults may be omitted. The verifier rejects inconsistent
    combinations with a message naming the field and the fix.

    ```mlir
    #lina.spec<decay = scalar, update = delta, beta = given, qk_l2norm = true,
               key_dim = 128, value_dim = 128, heads = 16, value_heads = 16,
               dtype = bf16, initial_state = true, final_state = true>
    ```
  }];
  let parameters = (ins
    Lina_EnumField<Lina_DecayKind>:$decay,
    Lina_EnumField<Lina_UpdateRule>:$update,
    Lina_EnumField<Lina_GateSource, "given">:$gate,
    OptionalParameter<"::mlir::FloatAttr">:$gate_lower_bound,
    Lina_EnumField<Lina_BetaSource, "none">:$beta,
    Lina_EnumField<Lina_LowRankSource, "input">:$low_rank_a,
    Lina_EnumField<Lina_LowRankSource, "input">:$low_rank_b,
    Lina_EnumField<Lina_WriteWeight, "one">:$write,
    DefaultValuedParameter<"bool", "false">:$qk_l2norm,
    OptionalParameter<"::mlir::FloatAttr">:$scale,
    "int64_t":$key_dim,
    "int64_t":$value_dim,
    "int64_t":$heads,
    "int64_t":$value_heads,
    "::mlir::Type":$dtype,
    DefaultValuedParameter<"bool", "false">:$initial_state,
    DefaultValuedParameter<"bool", "false">:$final_state,
    DefaultValuedParameter<"bool", "false">:$varlen
  );
  // Written out (SpecAttrSyntax.cpp) rather than `struct(params)`, whose
  // errors name neither the valid fields nor the values a typo was near.
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Lina_ScheduleAttr : Lina_Attr<"Schedule", "schedule"> {
  let summary = "how a chunked program runs on the GPU";
  let description = [{
    What lina-schedule decides for a lina.chunked (or, value columns and
    warps only, a lina.chunked_backward), and the CUDA emitter reads back:
    value columns a CTA (`tile_v`), `warps` a CTA, the `strategy` (one
    kernel walking the chunks, or a chunk-parallel kernel writing states
    or chunk data first), and the scan's options, among them the matrix
    products it runs on (`mma`: `warp`, mma.sync, or `warpgroup`, Hopper's
    warpgroup products). Options at their default are not printed.

    ```mlir
    lina.chunked @gdn <...> chunk_size(16)
        schedule <tile_v = 32, warps = 8, strategy = split, prefetch = true> {
    ```
  }];
  let parameters = (ins
    "int64_t":$tile_v,
    "int64_t":$warps,
    Lina_EnumField<Lina_Strategy, "fused">:$strategy,
    DefaultValuedParameter<"bool", "false">:$prefetch,
    DefaultValuedParameter<"bool", "false">:$shared_state,
    DefaultValuedParameter<"bool", "false">:$direct_decay,
    DefaultValuedParameter<"bool", "false">:$two_ctas,
    DefaultValuedParameter<"int64_t", "1">:$segments,
    Lina_EnumField<Lina_Mma, "warp">:$mma
  );
  let assemblyFormat = "`<` struct(params) `>`";
}

def Lina_PlacementAttr : Lina_Attr<"Placement", "placement"> {
  let summary = "where a chunked program's scan keeps its state and tiles";
  let description = [{
    What the placement passes decide for a lina.chunked's kernel that walks
    the chunks (the fused kernel, or the split or materialize scan), and the
    CUDA emitter prints: where the state lives (`state`: a shared-memory
    tile, or the tensor cores' accumulators, lina-place-state), how many
    buffers each tile it fetches ahead gets (`ring`: 1 to 3, or 0 to load
    each chunk's tiles when the chunk reaches them, lina-pipeline-loads) and
    how many CTAs an SM it asks ptxas to fit (`min_ctas`, its
    __launch_bounds__ minimum; 0 asks for none, lina-occupancy); and the
    same minimum for the chunk-parallel kernel beside it, the split
    strategy's prepare kernel or the materialize strategy's output kernel
    (`parallel_min_ctas`, lina-occupancy). Fields at their default are not
    printed.

    ```mlir
    lina.chunked @gdn <...> chunk_size(16)
        schedule <tile_v = 32, warps = 8, strategy = split, prefetch = true>
        placement <state = registers, ring = 2> {
    ```
  }];
  let parameters = (ins
    Lina_EnumField<Lina_StateHome, "shared">:$state,
    DefaultValuedParameter<"int64_t", "0">:$ring,
    DefaultValuedParameter<"int64_t", "0">:$min_ctas,
    DefaultValuedParameter<"int64_t", "0">:$parallel_min_ctas
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // LINA_ATTRS_TD
