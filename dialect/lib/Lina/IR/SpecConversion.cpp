//===- SpecConversion.cpp - #lina.spec <-> lina::Spec ------------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Dialect/Lina/IR/SpecConversion.h"
#include "lina/Dialect/Lina/IR/NestingDepth.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace lina {

// The enums of lina::Spec and of the dialect list their cases in the same
// order (LinaEnums.td says so); the static_asserts keep it that way.
template <typename To, typename From> static To castEnum(From from) {
  return static_cast<To>(static_cast<int>(from));
}
static_assert(static_cast<int>(ir::DecayKind::per_channel) ==
              static_cast<int>(DecayKind::PerChannel));
static_assert(static_cast<int>(ir::UpdateRule::dplr) ==
              static_cast<int>(UpdateRule::DPLR));
static_assert(static_cast<int>(ir::GateSource::lower_bound) ==
              static_cast<int>(GateSource::LowerBound));
static_assert(static_cast<int>(ir::BetaSource::two_sigmoid) ==
              static_cast<int>(BetaSource::TwoSigmoid));
static_assert(static_cast<int>(ir::WriteWeight::beta) ==
              static_cast<int>(WriteWeight::Beta));
static_assert(static_cast<int>(ir::LowRankSource::neg_decayed_key) ==
              static_cast<int>(LowRankSource::NegDecayedKey));

Spec toSpec(SpecAttr attr) {
  Spec s;
  s.name.clear();
  s.decay = castEnum<DecayKind>(attr.getDecay());
  s.update = castEnum<UpdateRule>(attr.getUpdate());
  s.gate = castEnum<GateSource>(attr.getGate());
  if (FloatAttr lb = attr.getGateLowerBound())
    s.gateLowerBound = lb.getValueAsDouble();
  s.beta = castEnum<BetaSource>(attr.getBeta());
  s.lowRankA = castEnum<LowRankSource>(attr.getLowRankA());
  s.lowRankB = castEnum<LowRankSource>(attr.getLowRankB());
  s.write = castEnum<WriteWeight>(attr.getWrite());
  s.qkL2Norm = attr.getQkL2norm();
  if (FloatAttr scale = attr.getScale())
    s.scale = scale.getValueAsDouble();
  s.keyDim = attr.getKeyDim();
  s.valueDim = attr.getValueDim();
  s.heads = attr.getHeads();
  s.valueHeads = attr.getValueHeads();
  Type t = attr.getDtype();
  s.dtype = t.isF32() ? DType::F32 : t.isF16() ? DType::F16 : DType::BF16;
  s.initialState = attr.getInitialState();
  s.finalState = attr.getFinalState();
  s.varlen = attr.getVarlen();
  return s;
}

SpecAttr toSpecAttr(MLIRContext *ctx, const Spec &s) {
  Builder b(ctx);
  Type dtype = s.dtype == DType::F32   ? b.getF32Type()
               : s.dtype == DType::F16 ? b.getF16Type()
                                       : b.getBF16Type();
  FloatAttr lowerBound = s.gate == GateSource::LowerBound
                             ? b.getF64FloatAttr(s.gateLowerBound)
                             : FloatAttr();
  FloatAttr scale = s.scale ? b.getF64FloatAttr(*s.scale) : FloatAttr();
  return SpecAttr::get(
      ctx, castEnum<ir::DecayKind>(s.decay), castEnum<ir::UpdateRule>(s.update),
      castEnum<ir::GateSource>(s.gate), lowerBound,
      castEnum<ir::BetaSource>(s.beta),
      castEnum<ir::LowRankSource>(s.lowRankA),
      castEnum<ir::LowRankSource>(s.lowRankB),
      castEnum<ir::WriteWeight>(s.write), s.qkL2Norm, scale, s.keyDim,
      s.valueDim, s.heads, s.valueHeads, dtype, s.initialState, s.finalState,
      s.varlen);
}

bool parseSpecText(llvm::StringRef text, llvm::StringRef bufferName,
                   Spec &spec, std::string &error) {
  // Before the parser, whose recursion deep input would overflow the stack.
  if (std::optional<std::string> tooDeep = checkNestingDepth(text, bufferName)) {
    error = "invalid spec file: " + *tooDeep;
    return false;
  }
  MLIRContext ctx;
  ctx.loadDialect<LinaDialect>();
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(text, bufferName), llvm::SMLoc());
  std::string diagnostics;
  llvm::raw_string_ostream diagOS(diagnostics);
  SourceMgrDiagnosticHandler handler(sourceMgr, &ctx, diagOS);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &ctx);
  if (!module) {
    error = "invalid spec file:\n" + diagnostics;
    return false;
  }
  SmallVector<RecurrenceOp> specs;
  module->walk([&](RecurrenceOp op) { specs.push_back(op); });
  if (specs.size() != 1) {
    error = "'" + bufferName.str() +
            "' must hold exactly one lina.recurrence, found " +
            std::to_string(specs.size());
    return false;
  }
  // A spec file says what to compute; the schedule is chosen for each call
  // (or given, or tuned). A recorded one would be silently ignored here.
  if (specs.front().getScheduleAttr()) {
    error = "'" + bufferName.str() +
            "' records a schedule on its lina.recurrence (chunk_size(...) "
            "schedule <...>, lina-choose-schedule's output): a spec file "
            "holds the spec alone; remove them and give the schedule as "
            "options (--chunk-size, --tile-v, --warps, ...) or tune it";
    return false;
  }
  spec = toSpec(specs.front().getSpec());
  spec.name = specs.front().getSymName().str();
  return true;
}

OwningOpRef<ModuleOp> buildSpecModule(MLIRContext &ctx, const Spec &spec) {
  ctx.loadDialect<LinaDialect>();
  OpBuilder b(&ctx);
  OwningOpRef<ModuleOp> module = ModuleOp::create(b.getUnknownLoc());
  b.setInsertionPointToEnd(module->getBody());
  b.create<RecurrenceOp>(b.getUnknownLoc(),
                         spec.name.empty() ? "recurrence" : spec.name,
                         toSpecAttr(&ctx, spec));
  return module;
}

std::string printSpecModule(const Spec &spec) {
  MLIRContext ctx;
  OwningOpRef<ModuleOp> module = buildSpecModule(ctx, spec);
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os);
  return text;
}

} // namespace lina
