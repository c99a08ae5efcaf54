//===- LinaOps.cpp - Verifiers of the lina ops -------------------------===//
//
// Part of lina. Tile ops check their shapes against each other and against
// the spec of the enclosing lina.chunked, so a malformed chunked program is
// rejected before any backend sees it.
//
//===----------------------------------------------------------------------===//
#include "lina/Dialect/Lina/IR/Lina.h"
#include "lina/Dialect/Lina/IR/SpecConversion.h"

#include "OpVerification.h"
#include "SumTerms.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace lina;

#define GET_OP_CLASSES
#include "lina/Dialect/Lina/IR/LinaOps.cpp.inc"

static TileType tileOf(Value v) { return cast<TileType>(v.getType()); }

std::string lina::shapeStr(TileType t) {
  return std::to_string(t.getRows()) + "x" + std::to_string(t.getCols());
}

/// A gate tile broadcasts one column or carries one per channel.
static LogicalResult checkGates(Operation *op, TileType gates, int64_t rows,
                                int64_t cols, StringRef what) {
  if (gates.getRows() != rows)
    return op->emitOpError() << what << " has " << gates.getRows()
                             << " rows, expected " << rows;
  if (gates.getCols() != 1 && gates.getCols() != cols)
    return op->emitOpError() << what << " must have 1 or " << cols
                             << " columns, got " << gates.getCols();
  return success();
}

//===----------------------------------------------------------------------===//
// ChunkedOp
//===----------------------------------------------------------------------===//

LogicalResult lina::verifyChunkSize(Operation *op, int64_t c) {
  if (c <= 0 || c > 256 || (c & (c - 1)) != 0)
    return op->emitOpError()
           << "chunk_size must be a power of two from 1 to 256, got " << c;
  return success();
}

LogicalResult lina::verifySchedule(Operation *op, SpecAttr spec,
                                   ScheduleAttr schedule) {
  if (!schedule)
    return success();
  int64_t tv = schedule.getTileV(), w = schedule.getWarps(),
          v = spec.getValueDim();
  if (tv < 8 || tv % 8 != 0 || v % tv != 0)
    return op->emitOpError() << "schedule: tile_v (" << tv
                             << ") must be a multiple of 8 dividing value_dim ("
                             << v << ")";
  if (w != 1 && w != 2 && w != 4 && w != 8 && w != 16)
    return op->emitOpError() << "schedule: warps must be 1, 2, 4, 8 or 16, got "
                             << w;
  if (schedule.getSegments() < 1 || schedule.getSegments() > 16)
    return op->emitOpError() << "schedule: segments must be 1 to 16, got "
                             << schedule.getSegments();
  return success();
}

LogicalResult RecurrenceOp::verify() {
  // A schedule is chosen for a chunk size (the wgmma scan's layout needs 64
  // tokens): the two are recorded together or not at all.
  if (bool(getChunkSizeAttr()) != bool(getScheduleAttr()))
    return emitOpError() << "chunk_size and schedule are recorded together "
                            "(lina-choose-schedule writes both)";
  if (std::optional<uint64_t> c = getChunkSize()) {
    if (*c != 16 && *c != 32 && *c != 64 && *c != 128)
      return emitOpError() << "chunk_size must be 16, 32, 64 or 128, got "
                           << *c;
  }
  return verifySchedule(*this, getSpec(), getScheduleAttr());
}

LogicalResult ChunkedOp::verify() {
  if (failed(verifyChunkSize(*this, getChunkSize())))
    return failure();
  return verifySchedule(*this, getSpec(), getScheduleAttr());
}

LogicalResult ChunkedOp::verifyRegions() {
  SpecAttr spec = getSpec();
  Block &body = getBody().front();
  auto stateType = TileType::get(getContext(), spec.getKeyDim(),
                                 spec.getValueDim());
  if (body.getNumArguments() != 1 || body.getArgument(0).getType() != stateType)
    return emitOpError() << "body must take one argument, the state, of type "
                         << stateType;
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError() << "body must end with lina.yield of the new state";
  if (yield.getState().getType() != stateType)
    return yield.emitOpError() << "yields " << yield.getState().getType()
                               << ", expected the state type " << stateType;
  return success();
}

//===----------------------------------------------------------------------===//
// Loads and stores
//===----------------------------------------------------------------------===//

/// Columns of `operand` under `spec`, or -1 when the spec has no such input.
int64_t lina::operandColumns(ir::Operand operand, const Spec &spec) {
  switch (operand) {
  case ir::Operand::q:
  case ir::Operand::k:
    return spec.keyDim;
  case ir::Operand::v:
  case ir::Operand::o:
    return spec.valueDim;
  case ir::Operand::g:
    return spec.decay == DecayKind::None         ? -1
           : spec.decay == DecayKind::PerChannel ? spec.keyDim
                                                 : 1;
  case ir::Operand::beta:
    return spec.beta == BetaSource::None ? -1 : 1;
  case ir::Operand::a:
    return spec.update == UpdateRule::DPLR &&
                   spec.lowRankA == LowRankSource::Input
               ? spec.keyDim
               : -1;
  case ir::Operand::b:
    return spec.update == UpdateRule::DPLR &&
                   spec.lowRankB == LowRankSource::Input
               ? spec.keyDim
               : -1;
  }
  return -1;
}

ChunkedContext lina::chunkedContext(Operation *op) {
  if (auto forward = op->getParentOfType<ChunkedOp>())
    return {forward.getSpec(), static_cast<int64_t>(forward.getChunkSize())};
  auto backward = op->getParentOfType<ChunkedBackwardOp>();
  return {backward.getSpec(), static_cast<int64_t>(backward.getChunkSize())};
}

static LogicalResult checkChunkOperand(Operation *op, ir::Operand operand,
                                       TileType tile) {
  ChunkedContext chunked = chunkedContext(op);
  Spec spec = toSpec(chunked.spec);
  int64_t cols = operandColumns(operand, spec);
  if (cols < 0)
    return op->emitOpError() << "the spec has no per-token input '"
                             << ir::stringifyOperand(operand) << "'";
  if (tile.getRows() != chunked.chunkSize || tile.getCols() != cols)
    return op->emitOpError()
           << "'" << ir::stringifyOperand(operand) << "' tiles are "
           << chunked.chunkSize << "x" << cols << ", got " << shapeStr(tile);
  return success();
}

LogicalResult LoadOp::verify() {
  if (getOperand() == ir::Operand::o)
    return emitOpError() << "'o' is the output: it is stored, not loaded";
  return checkChunkOperand(*this, getOperand(), tileOf(getResult()));
}

LogicalResult StoreOp::verify() {
  if (getOperand() != ir::Operand::o)
    return emitOpError() << "only the output 'o' is stored, got '"
                         << ir::stringifyOperand(getOperand()) << "'";
  return checkChunkOperand(*this, getOperand(), tileOf(getValue()));
}

//===----------------------------------------------------------------------===//
// Elementwise preprocessing
//===----------------------------------------------------------------------===//

LogicalResult lina::verifyGateSource(Operation *op, ir::GateSource source,
                                     bool hasBound) {
  if (source == ir::GateSource::given)
    return op->emitOpError() << "a given gate needs no "
                             << op->getName().getStringRef();
  bool wantsBound = source == ir::GateSource::lower_bound;
  if (wantsBound != hasBound)
    return op->emitOpError() << "lower_bound is required with the "
                                "lower_bound source and only there";
  return success();
}

LogicalResult GateOp::verify() {
  return verifyGateSource(*this, getSource(), getLowerBound().has_value());
}

LogicalResult BetaOp::verify() {
  if (getSource() == ir::BetaSource::none ||
      getSource() == ir::BetaSource::given)
    return emitOpError() << "lina.beta computes beta from a logit: use "
                            "sigmoid or two_sigmoid";
  return success();
}

//===----------------------------------------------------------------------===//
// Products with decay
//===----------------------------------------------------------------------===//

LogicalResult ScaleRowsOp::verify() {
  TileType in = tileOf(getInput()), w = tileOf(getWeights());
  if (w.getRows() != in.getRows() || w.getCols() != 1)
    return emitOpError() << "weights must be " << in.getRows()
                         << "x1, got " << shapeStr(w);
  if (tileOf(getResult()) != in)
    return emitOpError() << "result must have the input's type";
  return success();
}

LogicalResult DecayRowsOp::verify() {
  TileType in = tileOf(getInput());
  if (tileOf(getResult()) != in)
    return emitOpError() << "result must have the input's type";
  return checkGates(*this, tileOf(getLogGates()), in.getRows(), in.getCols(),
                    "log_gates");
}

LogicalResult DecayStateOp::verify() {
  TileType state = tileOf(getState()), gates = tileOf(getLogGates());
  if (tileOf(getResult()) != state)
    return emitOpError() << "result must have the state's type";
  if (gates.getCols() != 1 && gates.getCols() != state.getRows())
    return emitOpError() << "log_gates must have 1 or " << state.getRows()
                         << " columns (one per key channel), got "
                         << gates.getCols();
  return success();
}

LogicalResult DecayProductOp::verify() {
  TileType lhs = tileOf(getLhs()), rhs = tileOf(getRhs());
  if (lhs != rhs)
    return emitOpError() << "lhs and rhs must have the same shape, got "
                         << shapeStr(lhs) << " and " << shapeStr(rhs);
  int64_t c = lhs.getRows();
  if (failed(checkGates(*this, tileOf(getLhsGates()), c, lhs.getCols(),
                        "lhs_gates")) ||
      failed(checkGates(*this, tileOf(getRhsGates()), c, lhs.getCols(),
                        "rhs_gates")))
    return failure();
  TileType res = tileOf(getResult());
  if (res.getRows() != c || res.getCols() != c)
    return emitOpError() << "result must be " << c << "x" << c << ", got "
                         << shapeStr(res);
  return success();
}

LogicalResult TriSolveOp::verify() {
  TileType lower = tileOf(getLower()), rhs = tileOf(getRhs());
  if (lower.getRows() != lower.getCols())
    return emitOpError() << "the triangular factor must be square, got "
                         << shapeStr(lower);
  if (rhs.getRows() != lower.getRows())
    return emitOpError() << "rhs must have " << lower.getRows()
                         << " rows, got " << rhs.getRows();
  if (tileOf(getResult()) != rhs)
    return emitOpError() << "result must have the rhs's type";
  return success();
}

LogicalResult MatmulOp::verify() {
  TileType lhs = tileOf(getLhs()), rhs = tileOf(getRhs()),
           res = tileOf(getResult());
  int64_t m = getTransposeLhs() ? lhs.getCols() : lhs.getRows();
  int64_t k = getTransposeLhs() ? lhs.getRows() : lhs.getCols();
  if (k != rhs.getRows())
    return emitOpError() << "contraction mismatch: " << k << " vs "
                         << rhs.getRows();
  if (res.getRows() != m || res.getCols() != rhs.getCols())
    return emitOpError() << "result must be " << m << "x" << rhs.getCols()
                         << ", got " << shapeStr(res);
  return success();
}
