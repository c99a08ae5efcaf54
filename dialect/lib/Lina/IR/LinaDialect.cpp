//===- LinaDialect.cpp - Dialect registration and the tile type --------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Dialect/Lina/IR/Lina.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace lina;

#include "lina/Dialect/Lina/IR/LinaDialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "lina/Dialect/Lina/IR/LinaTypes.cpp.inc"

void LinaDialect::initialize() {
  registerAttributes();
  addTypes<
#define GET_TYPEDEF_LIST
#include "lina/Dialect/Lina/IR/LinaTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "lina/Dialect/Lina/IR/LinaOps.cpp.inc"
      >();
}

// The passes' records, discardable attributes the emitter reads back:
//  - `lina.cut = "stored" | "last_row"`, which lina-cut-state sets on the ops
//    of a split chunk whose values the prepare kernel stores for the scan
//    (lina/Transforms/StateCut.h): a value of a chunk's body, one tile;
//  - `lina.state_use`, which lina-place-state sets on the ops of a
//    lina.chunked whose placement keeps the state in registers, naming the
//    part each plays in using them (lina/Codegen/Passes.h).
//  - `lina.row_pass`, which lina-row-passes sets on the ops of a split
//    lina.chunked that its prepare kernel does in a row pass, naming the
//    pass by its index (lina/Codegen/Passes.h).
//  - `lina.in_global`, which lina-global-tiles sets on the ops of a
//    lina.chunked_backward whose tile a kernel of the backward keeps in
//    global memory, naming the kernels: "scan" (the reverse scan) and
//    "chunks" (the gradients kernel) (lina/Codegen/Passes.h).
//  - `lina.interval`, which lina-group-barriers sets on the ops of a
//    lina.chunked_backward that its gradients kernel runs, the barrier
//    interval each runs in (lina/Codegen/Passes.h).
//  - `lina.packed_states`, which lina-pack-states sets on a
//    lina.chunked_backward, naming the body arguments (0: the state, 1: its
//    gradient) its gradients kernel keeps packed in bf16
//    (lina/Codegen/Passes.h).
//  - `lina.packed`, which lina-pack-states sets on the ops of a
//    lina.chunked_backward whose 16-bit tiles its gradients kernel loads
//    and keeps packed (lina/Codegen/Passes.h).
//  - `lina.warpgroup`, which lina-warpgroup-roles sets on the ops of a
//    lina.chunked whose schedule asks for warpgroup products (`mma =
//    warpgroup`),
//    naming the part each plays in the generated warpgroup scan
//    (lina/Codegen/Passes.h).
//  - `lina.wg_group`, which lina-warpgroup-groups sets on the products of
//    such a chunk's scan, its commit group in the order the scan issues
//    them (lina/Codegen/Passes.h).
//  - `lina.wg_record`, which lina-warpgroup-record sets on the per-token
//    columns, k's rows' norms and k's chains of row factors of a delta
//    chunk that its prepare kernel computes into the chunk's record, its
//    slot there (lina/Codegen/Passes.h).
// (The placement itself is the op's declared #lina.placement.)
/// Whether `value` is an i64 of 0 or more: the index the discardable
/// records that number things carry (a commit group, a slot, a row pass).
static bool isIndex(Attribute value) {
  auto index = dyn_cast<IntegerAttr>(value);
  return index && index.getType().isSignlessInteger(64) && index.getInt() >= 0;
}

LogicalResult LinaDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  if (attr.getName() == "lina.state_use") {
    auto use = dyn_cast<StringAttr>(attr.getValue());
    if (!use || !llvm::is_contained({"product", "hoisted", "folded", "epilogue",
                                     "reduces", "fused"},
                                    use.getValue()))
      return op->emitError()
             << "'lina.state_use' must be \"product\", \"hoisted\", "
                "\"folded\", \"epilogue\", \"reduces\" or \"fused\", got "
             << attr.getValue();
    PlacementAttr placement;
    if (auto chunked = dyn_cast_or_null<ChunkedOp>(op->getParentOp()))
      placement = chunked.getPlacementAttr();
    else if (auto backward =
                 dyn_cast_or_null<ChunkedBackwardOp>(op->getParentOp()))
      placement = backward.getPlacementAttr();
    if (!placement || placement.getState() != ir::StateHome::registers)
      return op->emitError() << "'lina.state_use' belongs on an op of a "
                                "lina.chunked or lina.chunked_backward whose "
                                "state is in registers (placement <state = "
                                "registers>)";
    return success();
  }
  if (attr.getName() == "lina.warpgroup") {
    auto role = dyn_cast<StringAttr>(attr.getValue());
    if (!role ||
        !llvm::is_contained(
            {"fetch", "column", "row_factor", "scores", "state_product",
             "intra", "output", "store", "decay", "update", "next",
             "solve_matrix", "residual_product", "residual", "solve",
             "prepared", "channel", "residual_intra", "scores_apart"},
            role.getValue()))
      return op->emitError()
             << "'lina.warpgroup' must be a part of the warpgroup scan "
                "(\"fetch\", \"column\", \"row_factor\", \"scores\", "
                "\"state_product\", \"intra\", \"output\", \"store\", "
                "\"decay\", \"update\", \"next\", \"solve_matrix\", "
                "\"residual_product\", \"residual\", \"solve\", "
                "\"prepared\", \"channel\", \"residual_intra\" or "
                "\"scores_apart\"), got "
             << attr.getValue();
    auto chunked = dyn_cast_or_null<ChunkedOp>(op->getParentOp());
    ScheduleAttr schedule = chunked ? chunked.getScheduleAttr() : nullptr;
    if (!schedule || schedule.getMma() != ir::Mma::warpgroup)
      return op->emitError() << "'lina.warpgroup' belongs on an op of a "
                                "lina.chunked whose schedule asks for "
                                "warpgroup products (mma = warpgroup)";
    return success();
  }
  if (attr.getName() == "lina.wg_group") {
    if (!isIndex(attr.getValue()))
      return op->emitError()
             << "'lina.wg_group' must be a commit group, an i64 of 0 or "
                "more, got "
             << attr.getValue();
    auto role = op->getAttrOfType<StringAttr>("lina.warpgroup");
    if (!role ||
        !llvm::is_contained({"scores", "state_product", "intra", "update",
                             "residual_product", "solve", "residual_intra"},
                            role.getValue()))
      return op->emitError()
             << "'lina.wg_group' belongs on a product of the warpgroup scan "
                "(lina.warpgroup \"scores\", \"state_product\", \"intra\", "
                "\"update\", \"residual_product\", \"solve\" or "
                "\"residual_intra\")";
    return success();
  }
  if (attr.getName() == "lina.wg_record") {
    if (!isIndex(attr.getValue()))
      return op->emitError()
             << "'lina.wg_record' must be a slot of the chunk's record, an "
                "i64 of 0 or more, got "
             << attr.getValue();
    auto role = op->getAttrOfType<StringAttr>("lina.warpgroup");
    if (!role || !llvm::is_contained({"column", "row_factor", "prepared",
                                      "scores", "decay", "solve"},
                                     role.getValue()))
      return op->emitError()
             << "'lina.wg_record' belongs on a per-token column, a row "
                "factor or, with a per-channel decay, a prepared operand of "
                "the warpgroup scan (lina.warpgroup \"column\", "
                "\"row_factor\", \"prepared\", \"scores\", \"decay\" or "
                "\"solve\")";
    return success();
  }
  if (attr.getName() == "lina.row_pass") {
    if (!isIndex(attr.getValue()))
      return op->emitError()
             << "'lina.row_pass' must be a row pass's index, an i64 of 0 "
                "or more, got "
             << attr.getValue();
    auto chunked = dyn_cast_or_null<ChunkedOp>(op->getParentOp());
    ScheduleAttr schedule = chunked ? chunked.getScheduleAttr() : nullptr;
    if (!schedule || schedule.getStrategy() != ir::Strategy::split)
      return op->emitError() << "'lina.row_pass' belongs on an op of a "
                                "lina.chunked whose schedule splits it "
                                "(strategy = split)";
    return success();
  }
  if (attr.getName() == "lina.in_global") {
    auto kernels = dyn_cast<ArrayAttr>(attr.getValue());
    llvm::SmallVector<StringRef, 2> names;
    bool valid = kernels && !kernels.empty();
    for (Attribute a : valid ? kernels.getValue() : ArrayRef<Attribute>()) {
      auto name = dyn_cast<StringAttr>(a);
      valid = valid && name &&
              llvm::is_contained({"scan", "chunks"}, name.getValue()) &&
              !llvm::is_contained(names, name.getValue());
      if (name)
        names.push_back(name.getValue());
    }
    if (!valid)
      return op->emitError()
             << "'lina.in_global' must name the kernels that keep the tile "
                "in global memory, \"scan\" and/or \"chunks\" once each, got "
             << attr.getValue();
    if (!isa_and_nonnull<ChunkedBackwardOp>(op->getParentOp()) ||
        op->getNumResults() != 1 || !isa<TileType>(op->getResult(0).getType()))
      return op->emitError() << "'lina.in_global' belongs on an op of a "
                                "lina.chunked_backward body that makes one "
                                "tile";
    return success();
  }
  if (attr.getName() == "lina.interval") {
    if (!isIndex(attr.getValue()))
      return op->emitError()
             << "'lina.interval' must be a barrier interval's index, an i64 "
                "of 0 or more, got "
             << attr.getValue();
    if (!isa_and_nonnull<ChunkedBackwardOp>(op->getParentOp()))
      return op->emitError() << "'lina.interval' belongs on an op of a "
                                "lina.chunked_backward body";
    return success();
  }
  if (attr.getName() == "lina.packed_states") {
    auto states = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    bool valid = states && !states.empty();
    int64_t previous = -1;
    for (int64_t index : valid ? states.asArrayRef() : ArrayRef<int64_t>()) {
      valid = valid && index > previous && index <= 1;
      previous = index;
    }
    if (!valid)
      return op->emitError()
             << "'lina.packed_states' must name the chunk's states kept "
                "packed, 0 (the state) and/or 1 (its gradient) in order, got "
             << attr.getValue();
    if (!isa<ChunkedBackwardOp>(op))
      return op->emitError() << "'lina.packed_states' belongs on a "
                                "lina.chunked_backward";
    return success();
  }
  if (attr.getName() == "lina.packed") {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError()
             << "'lina.packed' is a unit attribute, got " << attr.getValue();
    if (!isa_and_nonnull<ChunkedBackwardOp>(op->getParentOp()) ||
        op->getNumResults() != 1 || !isa<TileType>(op->getResult(0).getType()))
      return op->emitError() << "'lina.packed' belongs on an op of a "
                                "lina.chunked_backward body that makes one "
                                "tile";
    return success();
  }
  if (attr.getName() != "lina.cut")
    return op->emitError() << "unknown lina attribute '"
                           << attr.getName().getValue() << "'";
  auto cut = dyn_cast<StringAttr>(attr.getValue());
  if (!cut || (cut.getValue() != "stored" && cut.getValue() != "last_row"))
    return op->emitError()
           << "'lina.cut' must be \"stored\" or \"last_row\", got "
           << attr.getValue();
  if (!isa_and_nonnull<ChunkedOp, ChunkedBackwardOp>(op->getParentOp()) ||
      op->getNumResults() != 1 || !isa<TileType>(op->getResult(0).getType()))
    return op->emitError() << "'lina.cut' belongs on an op of a lina.chunked "
                              "or lina.chunked_backward body that makes one "
                              "tile";
  return success();
}

// `!lina.tile<64x128>`: the dimension-list syntax of shaped types, because
// `64x128` does not lex as two integers.
Type TileType::parse(AsmParser &parser) {
  SmallVector<int64_t, 2> dims;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseLess() ||
      parser.parseDimensionList(dims, /*allowDynamic=*/false,
                                /*withTrailingX=*/false) ||
      parser.parseGreater())
    return {};
  if (dims.size() != 2) {
    parser.emitError(loc, "a tile has two dimensions, rows x cols, e.g. "
                          "!lina.tile<64x128>");
    return {};
  }
  return parser.getChecked<TileType>(loc, parser.getContext(), dims[0],
                                     dims[1]);
}

void TileType::print(AsmPrinter &printer) const {
  printer << "<" << getRows() << "x" << getCols() << ">";
}

LogicalResult TileType::verify(function_ref<InFlightDiagnostic()> emitError,
                               int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0)
    return emitError() << "tile dimensions must be positive, got " << rows
                       << "x" << cols;
  return success();
}
