//===- LinaGradOps.cpp - Verifiers of the backward's ops ---------------===//
//
// Part of lina. lina.chunked_backward's region and the shapes of the tile
// ops that only the backward uses.
//
//===----------------------------------------------------------------------===//
#include "lina/Dialect/Lina/IR/Lina.h"
#include "lina/Dialect/Lina/IR/SpecConversion.h"

#include "OpVerification.h"

using namespace mlir;
using namespace lina;

static TileType tileOf(Value v) { return cast<TileType>(v.getType()); }

LogicalResult ChunkedBackwardOp::verify() {
  if (failed(verifyChunkSize(*this, getChunkSize())))
    return failure();
  return verifySchedule(*this, getSpec(), getScheduleAttr());
}

LogicalResult ChunkedBackwardOp::verifyRegions() {
  SpecAttr spec = getSpec();
  Block &body = getBody().front();
  auto stateType = TileType::get(getContext(), spec.getKeyDim(),
                                 spec.getValueDim());
  if (body.getNumArguments() != 2 ||
      body.getArgument(0).getType() != stateType ||
      body.getArgument(1).getType() != stateType)
    return emitOpError() << "body must take two arguments of type "
                         << stateType
                         << ": the state before the chunk and the gradient "
                            "of the state after it";
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield || yield.getState().getType() != stateType)
    return emitOpError() << "body must end with lina.yield of the gradient "
                            "of the state before the chunk, of type "
                         << stateType;
  return success();
}

LogicalResult LoadOutputGradOp::verify() {
  ChunkedContext chunked = chunkedContext(*this);
  TileType t = tileOf(getResult());
  if (t.getRows() != chunked.chunkSize ||
      t.getCols() != chunked.spec.getValueDim())
    return emitOpError() << "the gradient of 'o' is "
                         << chunked.chunkSize << "x"
                         << chunked.spec.getValueDim() << ", got "
                         << shapeStr(t);
  return success();
}

LogicalResult AccumulateOp::verify() {
  ChunkedContext chunked = chunkedContext(*this);
  Spec spec = toSpec(chunked.spec);
  TileType t = tileOf(getValue());
  bool computedGate = spec.decay != DecayKind::None &&
                      spec.decay != DecayKind::FixedPerHead &&
                      spec.gate != GateSource::Given;
  switch (getOperand()) {
  case ir::Gradient::gate_a_log:
  case ir::Gradient::gate_dt_bias:
    if (!computedGate)
      return emitOpError() << "the spec computes no gate: it has no '"
                           << ir::stringifyGradient(getOperand()) << "'";
    return success();
  default:
    break;
  }
  auto operand = ir::symbolizeOperand(ir::stringifyGradient(getOperand()));
  int64_t cols = operand ? operandColumns(*operand, spec) : -1;
  if (cols < 0)
    return emitOpError() << "the spec has no input '"
                         << ir::stringifyGradient(getOperand()) << "'";
  if (t.getRows() != chunked.chunkSize || t.getCols() != cols)
    return emitOpError() << "the gradient of '"
                         << ir::stringifyGradient(getOperand()) << "' is "
                         << chunked.chunkSize << "x" << cols << ", got "
                         << shapeStr(t);
  return success();
}

/// A reduction of each row of `in` to one column: `out` is rows x 1.
static LogicalResult verifyRowReduction(Operation *op, TileType in,
                                        TileType out) {
  if (out.getRows() != in.getRows() || out.getCols() != 1)
    return op->emitOpError() << "result must be " << in.getRows()
                             << "x1, got " << shapeStr(out);
  return success();
}

LogicalResult RowSumOp::verify() {
  return verifyRowReduction(*this, tileOf(getInput()), tileOf(getResult()));
}

LogicalResult RowDotOp::verify() {
  return verifyRowReduction(*this, tileOf(getLhs()), tileOf(getResult()));
}

LogicalResult SumOp::verify() {
  if (getAdded().empty())
    return emitOpError() << "needs at least one added tile";
  if (getAdded().size() + getSubtracted().size() < 3)
    return emitOpError() << "needs at least three tiles (two are an add or "
                            "a sub)";
  return success();
}

LogicalResult ColSumOp::verify() {
  TileType in = tileOf(getInput()), out = tileOf(getResult());
  if (out.getRows() != 1 || out.getCols() != in.getCols())
    return emitOpError() << "result must be 1x" << in.getCols() << ", got "
                         << shapeStr(out);
  return success();
}

LogicalResult TransposeOp::verify() {
  TileType in = tileOf(getInput()), out = tileOf(getResult());
  if (out.getRows() != in.getCols() || out.getCols() != in.getRows())
    return emitOpError() << "result must be " << in.getCols() << "x"
                         << in.getRows() << ", got " << shapeStr(out);
  return success();
}

LogicalResult AddToLastRowOp::verify() {
  TileType in = tileOf(getInput()), row = tileOf(getRow());
  if (row.getRows() != 1 || row.getCols() != in.getCols())
    return emitOpError() << "row must be 1x" << in.getCols() << ", got "
                         << shapeStr(row);
  return success();
}

LogicalResult DecayProductGradOp::verify() {
  TileType grad = tileOf(getGrad()), other = tileOf(getOther());
  int64_t c = other.getRows();
  if (grad.getRows() != c || grad.getCols() != c)
    return emitOpError() << "grad must be " << c << "x" << c << ", got "
                         << shapeStr(grad);
  if (tileOf(getResult()) != other)
    return emitOpError() << "result must have the other factor's type";
  for (TileType gates : {tileOf(getLhsGates()), tileOf(getRhsGates())})
    if (gates.getRows() != c ||
        (gates.getCols() != 1 && gates.getCols() != other.getCols()))
      return emitOpError() << "gates must be " << c << "x1 or " << c << "x"
                           << other.getCols() << ", got " << shapeStr(gates);
  return success();
}

LogicalResult TriSolveTransposedOp::verify() {
  TileType lower = tileOf(getLower()), rhs = tileOf(getRhs());
  if (lower.getRows() != lower.getCols() || rhs.getRows() != lower.getRows())
    return emitOpError() << "the factor must be square with rhs's rows, got "
                         << shapeStr(lower) << " and " << shapeStr(rhs);
  return success();
}

LogicalResult BetaGradOp::verify() {
  if (getSource() != ir::BetaSource::sigmoid &&
      getSource() != ir::BetaSource::two_sigmoid)
    return emitOpError() << "only a computed beta (sigmoid, two_sigmoid) has "
                            "a gradient to its logit";
  return success();
}

LogicalResult GateGradOp::verify() {
  return verifyGateSource(*this, getSource(), getLowerBound().has_value());
}
