//===- LinaGradOps.cpp - Verifiers of the backward's ops ---------------===//
//
// Part of lina. lina.chunked_backward's region and the shapes of the tile
// ops that only the backward uses.
//
//===----------------------------------------------------------------------===//
#include "lina/Dialect/Lina/IR/Lina.h"
#include "lina/Dialect/Lina/IR/SpecConversion.h"

#include "OpVerification.h"
#include "SumTerms.h"

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
  auto stateType =
      TileType::get(getContext(), spec.getKeyDim(), spec.getValueDim());
  if (body.getNumArguments() != 2 ||
      body.getArgument(0).getType() != stateType ||
      body.getArgument(1).getType() != stateType)
    return emitOpError() << "body must take two arguments of type " << stateType
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
    return emitOpError() << "the gradient of 'o' is " << chunked.chunkSize
                         << "x" << chunked.spec.getValueDim() << ", got "
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
    return op->emitOpError()
           << "result must be " << in.getRows() << "x1, got " << shapeStr(out);
  return success();
}

LogicalResult RowSumOp::verify() {
  return verifyRowReduction(*this, tileOf(getInput()), tileOf(getResult()));
}

LogicalResult RowDotOp::verify() {
  return verifyRowReduction(*this, tileOf(getLhs()), tileOf(getResult()));
}

LogicalResult SumOp::verify() {
  size_t tiles = getAdded().size() + getSubtracted().size();
  size_t terms = tiles;
  if (std::optional<ArrayRef<int64_t>> factors = getFactors()) {
    // The added terms' factors must cover the added tiles exactly.
    size_t covered = 0;
    for (int64_t f : *factors) {
      if (f != 1 && f != 2)
        return emitOpError() << "a term has 1 or 2 factors, got " << f;
      if (covered < getAdded().size() && covered + f > getAdded().size())
        return emitOpError() << "a product term mixes added and "
                                "subtracted tiles";
      covered += f;
    }
    if (covered != tiles)
      return emitOpError() << "factors name " << covered << " tiles, but "
                           << tiles << " are given";
    terms = factors->size();
  }
  // Two tiles are an add, a sub or a mul, unless both are subtracted (the
  // negated sum of two tiles).
  if (terms < 2 || (tiles < 3 && !getAdded().empty()))
    return emitOpError() << "needs at least two terms and three tiles, or "
                            "two subtracted (two tiles are an add, a sub or "
                            "a mul)";
  return success();
}

SmallVector<SumOp::Term, 8> SumOp::getTerms() {
  SmallVector<Value, 16> tiles(getOperands());
  size_t added = getAdded().size();
  SmallVector<Term, 8> terms;
  SmallVector<int64_t, 16> factors(tiles.size(), 1);
  if (std::optional<ArrayRef<int64_t>> given = getFactors())
    factors.assign(given->begin(), given->end());
  size_t at = 0;
  for (int64_t f : factors) {
    Term term{tiles[at], f == 2 ? tiles[at + 1] : Value(), at >= added};
    terms.push_back(term);
    at += f;
  }
  return terms;
}

/// term := operand (`*` operand)?; terms := term (`,` term)*
static ParseResult
parseTermList(OpAsmParser &parser,
              SmallVectorImpl<OpAsmParser::UnresolvedOperand> &tiles,
              SmallVectorImpl<int64_t> &factors) {
  do {
    OpAsmParser::UnresolvedOperand x;
    if (parser.parseOperand(x))
      return failure();
    tiles.push_back(x);
    int64_t f = 1;
    if (succeeded(parser.parseOptionalStar())) {
      if (parser.parseOperand(x))
        return failure();
      tiles.push_back(x);
      f = 2;
    }
    factors.push_back(f);
  } while (succeeded(parser.parseOptionalComma()));
  return success();
}

ParseResult
lina::parseSumTerms(OpAsmParser &parser,
                    SmallVectorImpl<OpAsmParser::UnresolvedOperand> &added,
                    SmallVectorImpl<OpAsmParser::UnresolvedOperand> &subtracted,
                    DenseI64ArrayAttr &factors) {
  SmallVector<int64_t, 16> counts;
  // `minus` first: every term subtracted.
  const bool allSubtracted = succeeded(parser.parseOptionalKeyword("minus"));
  if (!allSubtracted && parseTermList(parser, added, counts))
    return failure();
  if ((allSubtracted || succeeded(parser.parseOptionalKeyword("minus"))) &&
      parseTermList(parser, subtracted, counts))
    return failure();
  if (llvm::is_contained(counts, 2))
    factors = DenseI64ArrayAttr::get(parser.getContext(), counts);
  return success();
}

void lina::printSumTerms(OpAsmPrinter &printer, Operation *op,
                         OperandRange added, OperandRange subtracted,
                         DenseI64ArrayAttr factors) {
  SmallVector<Value, 16> tiles(added);
  tiles.append(subtracted.begin(), subtracted.end());
  SmallVector<int64_t, 16> counts(tiles.size(), 1);
  // A malformed op (printed in a diagnostic before it verifies) shows its
  // tiles one by one.
  if (factors) {
    size_t total = 0;
    bool wellFormed = true;
    for (int64_t f : factors.asArrayRef()) {
      wellFormed &= (f == 1 || f == 2) &&
                    !(total < added.size() && total + f > added.size());
      total += f;
    }
    if (wellFormed && total == tiles.size())
      counts.assign(factors.asArrayRef().begin(), factors.asArrayRef().end());
  }
  size_t at = 0;
  bool first = true;
  for (int64_t f : counts) {
    if (at == added.size() && !subtracted.empty() && at > 0)
      printer << " minus ";
    else if (first && added.empty())
      printer << "minus ";
    else if (!first)
      printer << ", ";
    first = false;
    printer << tiles[at];
    if (f == 2)
      printer << " * " << tiles[at + 1];
    at += f;
  }
}

LogicalResult ColSumOp::verify() {
  TileType in = tileOf(getInput()), out = tileOf(getResult());
  if (out.getRows() != 1 || out.getCols() != in.getCols())
    return emitOpError() << "result must be 1x" << in.getCols() << ", got "
                         << shapeStr(out);
  return success();
}

LogicalResult StraddleSumOp::verify() {
  TileType in = tileOf(getInput()), out = tileOf(getResult());
  if (in.getRows() != in.getCols())
    return emitOpError() << "input must be square, got " << shapeStr(in);
  if (out.getRows() != in.getRows() || out.getCols() != 1)
    return emitOpError() << "result must be " << in.getRows() << "x1, got "
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
