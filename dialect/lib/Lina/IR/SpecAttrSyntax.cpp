//===- SpecAttrSyntax.cpp - The text of #lina.spec ---------------------===//
//
// Part of lina. `<decay = scalar, update = delta, ..., dtype = bf16>`: fields
// in any order, those with defaults optional, printed in a fixed order with
// defaults left out. Written by hand so that every mistake a user can make in
// a spec file is one error that says what would have been right: a wrong
// value lists the valid ones, a wrong field name lists the fields, and either
// names the one a typo was near.
//
//===----------------------------------------------------------------------===//
#include "lina/Dialect/Lina/IR/Lina.h"
#include "lina/Dialect/Lina/IR/Spelling.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace lina;

namespace {

/// Every field, in the order they print.
constexpr llvm::StringLiteral kFields[] = {
    "decay",         "update",      "gate",  "gate_lower_bound", "beta",
    "low_rank_a",    "low_rank_b",  "write", "qk_l2norm",        "scale",
    "key_dim",       "value_dim",   "heads", "value_heads",      "dtype",
    "initial_state", "final_state", "varlen"};

/// The fields without a default.
constexpr llvm::StringLiteral kRequired[] = {
    "decay", "update", "key_dim", "value_dim", "heads", "value_heads", "dtype"};

llvm::SmallVector<llvm::StringRef>
spellings(llvm::ArrayRef<llvm::StringLiteral> names) {
  return llvm::SmallVector<llvm::StringRef>(names.begin(), names.end());
}

/// One of `allowed` as a bare keyword, as its index. The error names the
/// field, lists `allowed` and the one a typo was near.
FailureOr<unsigned> parseChoice(AsmParser &parser, StringRef field,
                                ArrayRef<StringRef> allowed) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (failed(parser.parseOptionalKeyword(&keyword)))
    return parser.emitError(loc)
           << field << " must be one of: " << joinSpellings(allowed);
  for (auto [index, name] : llvm::enumerate(allowed))
    if (keyword == name)
      return index;
  InFlightDiagnostic diag = parser.emitError(loc)
                            << field
                            << " must be one of: " << joinSpellings(allowed)
                            << "; got '" << keyword << "'";
  if (StringRef near = closestSpelling(keyword, allowed); !near.empty())
    diag << " (did you mean '" << near << "'?)";
  return diag;
}

/// An enum field: its cases are 0..maxValue (LinaEnums.td).
template <typename Enum>
FailureOr<Enum> parseEnum(AsmParser &parser, StringRef field,
                          unsigned maxValue) {
  llvm::SmallVector<StringRef> names;
  for (unsigned value = 0; value <= maxValue; ++value)
    names.push_back(ir::stringifyEnum(static_cast<Enum>(value)));
  FailureOr<unsigned> index = parseChoice(parser, field, names);
  if (failed(index))
    return failure();
  return static_cast<Enum>(*index);
}

FailureOr<bool> parseBool(AsmParser &parser, StringRef field) {
  FailureOr<unsigned> index = parseChoice(parser, field, {"false", "true"});
  if (failed(index))
    return failure();
  return *index == 1;
}

FailureOr<int64_t> parseInt(AsmParser &parser, StringRef field) {
  SMLoc loc = parser.getCurrentLocation();
  int64_t value;
  OptionalParseResult parsed = parser.parseOptionalInteger(value);
  if (!parsed.has_value())
    return parser.emitError(loc) << field << " must be an integer, e.g. 128";
  if (failed(*parsed))
    return failure(); // too large: the parser said so
  return value;
}

FailureOr<FloatAttr> parseFloat(AsmParser &parser, StringRef field,
                                StringRef example) {
  SMLoc loc = parser.getCurrentLocation();
  Attribute attr;
  if (parser.parseAttribute(attr))
    return failure();
  if (auto value = dyn_cast<FloatAttr>(attr))
    return value;
  return parser.emitError(loc)
         << field << " must be an f64 literal, e.g. " << example;
}

/// The three dtypes a kernel takes, as keywords rather than any MLIR type,
/// so that a typo is answered with them.
FailureOr<Type> parseDType(AsmParser &parser, StringRef field) {
  FailureOr<unsigned> index =
      parseChoice(parser, field, {"bf16", "f16", "f32"});
  if (failed(index))
    return failure();
  Builder builder(parser.getContext());
  Type types[] = {builder.getBF16Type(), builder.getF16Type(),
                  builder.getF32Type()};
  return types[*index];
}

template <typename T> LogicalResult assign(T &out, FailureOr<T> value) {
  if (failed(value))
    return failure();
  out = *value;
  return success();
}

} // namespace

Attribute SpecAttr::parse(AsmParser &parser, Type) {
  SMLoc start = parser.getCurrentLocation();
  ir::DecayKind decay{};
  ir::UpdateRule update{};
  ir::GateSource gate = ir::GateSource::given;
  FloatAttr gateLowerBound, scale;
  ir::BetaSource beta = ir::BetaSource::none;
  ir::LowRankSource lowRankA = ir::LowRankSource::input;
  ir::LowRankSource lowRankB = ir::LowRankSource::input;
  ir::WriteWeight write = ir::WriteWeight::one;
  bool qkL2norm = false, initialState = false, finalState = false,
       varlen = false;
  int64_t keyDim = 0, valueDim = 0, heads = 0, valueHeads = 0;
  Type dtype;

  auto parseValue = [&](StringRef field) -> LogicalResult {
    if (field == "decay")
      return assign(decay, parseEnum<ir::DecayKind>(
                               parser, field, ir::getMaxEnumValForDecayKind()));
    if (field == "update")
      return assign(
          update, parseEnum<ir::UpdateRule>(parser, field,
                                            ir::getMaxEnumValForUpdateRule()));
    if (field == "gate")
      return assign(gate, parseEnum<ir::GateSource>(
                              parser, field, ir::getMaxEnumValForGateSource()));
    if (field == "gate_lower_bound")
      return assign(gateLowerBound, parseFloat(parser, field, "-5.0"));
    if (field == "beta")
      return assign(beta, parseEnum<ir::BetaSource>(
                              parser, field, ir::getMaxEnumValForBetaSource()));
    if (field == "low_rank_a" || field == "low_rank_b")
      return assign(field == "low_rank_a" ? lowRankA : lowRankB,
                    parseEnum<ir::LowRankSource>(
                        parser, field, ir::getMaxEnumValForLowRankSource()));
    if (field == "write")
      return assign(
          write, parseEnum<ir::WriteWeight>(parser, field,
                                            ir::getMaxEnumValForWriteWeight()));
    if (field == "qk_l2norm")
      return assign(qkL2norm, parseBool(parser, field));
    if (field == "scale")
      return assign(scale, parseFloat(parser, field, "0.0883883"));
    if (field == "key_dim")
      return assign(keyDim, parseInt(parser, field));
    if (field == "value_dim")
      return assign(valueDim, parseInt(parser, field));
    if (field == "heads")
      return assign(heads, parseInt(parser, field));
    if (field == "value_heads")
      return assign(valueHeads, parseInt(parser, field));
    if (field == "dtype")
      return assign(dtype, parseDType(parser, field));
    if (field == "initial_state")
      return assign(initialState, parseBool(parser, field));
    if (field == "final_state")
      return assign(finalState, parseBool(parser, field));
    assert(field == "varlen" && "every name in kFields is parsed above");
    return assign(varlen, parseBool(parser, field));
  };

  llvm::SmallVector<StringRef> fields = spellings(kFields);
  llvm::SmallVector<bool> seen(fields.size(), false);
  if (parser.parseLess())
    return {};
  do {
    SMLoc loc = parser.getCurrentLocation();
    StringRef field;
    if (failed(parser.parseOptionalKeyword(&field))) {
      parser.emitError(loc)
          << "expected a field name, one of: " << joinSpellings(fields);
      return {};
    }
    auto *it = llvm::find(fields, field);
    if (it == fields.end()) {
      InFlightDiagnostic diag = parser.emitError(loc)
                                << "unknown field '" << field << "'";
      if (StringRef near = closestSpelling(field, fields); !near.empty())
        diag << " (did you mean '" << near << "'?)";
      diag << "; the fields are: " << joinSpellings(fields);
      return {};
    }
    size_t index = it - fields.begin();
    if (seen[index]) {
      parser.emitError(loc) << "field '" << field << "' is given twice";
      return {};
    }
    seen[index] = true;
    if (parser.parseEqual() || failed(parseValue(field)))
      return {};
  } while (succeeded(parser.parseOptionalComma()));
  for (StringRef required : kRequired) {
    if (!seen[llvm::find(fields, required) - fields.begin()]) {
      parser.emitError(parser.getCurrentLocation())
          << "missing field '" << required
          << "'; a spec needs: " << joinSpellings(spellings(kRequired));
      return {};
    }
  }
  if (parser.parseGreater())
    return {};
  return parser.getChecked<SpecAttr>(
      start, parser.getContext(), decay, update, gate, gateLowerBound, beta,
      lowRankA, lowRankB, write, qkL2norm, scale, keyDim, valueDim, heads,
      valueHeads, dtype, initialState, finalState, varlen);
}

void SpecAttr::print(AsmPrinter &printer) const {
  // Fields at their default are left out, so the text a spec prints is the
  // same whichever defaults it spelled out.
  printer << "<decay = " << ir::stringifyDecayKind(getDecay())
          << ", update = " << ir::stringifyUpdateRule(getUpdate());
  if (getGate() != ir::GateSource::given)
    printer << ", gate = " << ir::stringifyGateSource(getGate());
  if (getGateLowerBound()) {
    printer << ", gate_lower_bound = ";
    printer.printStrippedAttrOrType(getGateLowerBound());
  }
  if (getBeta() != ir::BetaSource::none)
    printer << ", beta = " << ir::stringifyBetaSource(getBeta());
  if (getLowRankA() != ir::LowRankSource::input)
    printer << ", low_rank_a = " << ir::stringifyLowRankSource(getLowRankA());
  if (getLowRankB() != ir::LowRankSource::input)
    printer << ", low_rank_b = " << ir::stringifyLowRankSource(getLowRankB());
  if (getWrite() != ir::WriteWeight::one)
    printer << ", write = " << ir::stringifyWriteWeight(getWrite());
  if (getQkL2norm())
    printer << ", qk_l2norm = true";
  if (getScale()) {
    printer << ", scale = ";
    printer.printStrippedAttrOrType(getScale());
  }
  printer << ", key_dim = " << getKeyDim() << ", value_dim = " << getValueDim()
          << ", heads = " << getHeads() << ", value_heads = " << getValueHeads()
          << ", dtype = ";
  printer.printStrippedAttrOrType(getDtype());
  if (getInitialState())
    printer << ", initial_state = true";
  if (getFinalState())
    printer << ", final_state = true";
  if (getVarlen())
    printer << ", varlen = true";
  printer << ">";
}
