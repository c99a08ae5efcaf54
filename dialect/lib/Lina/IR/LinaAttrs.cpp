//===- LinaAttrs.cpp - The #lina.spec and #lina.placement attributes ---===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Dialect/Lina/IR/Lina.h"
#include "lina/Dialect/Lina/IR/SpecConversion.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace lina;

#include "lina/Dialect/Lina/IR/LinaEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "lina/Dialect/Lina/IR/LinaAttrs.cpp.inc"

void LinaDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "lina/Dialect/Lina/IR/LinaAttrs.cpp.inc"
      >();
}

// The checks themselves live in lina::validate so that the runtime, which has
// no MLIR, rejects exactly what the verifier rejects. Only what the plain
// struct cannot express (the dtype is an MLIR type, the floats are attributes)
// is checked here.
LogicalResult SpecAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, ir::DecayKind decay,
    ir::UpdateRule update, ir::GateSource gate, FloatAttr gateLowerBound,
    ir::BetaSource beta, ir::LowRankSource lowRankA,
    ir::LowRankSource lowRankB, ir::WriteWeight write, bool qkL2norm, FloatAttr scale, int64_t keyDim,
    int64_t valueDim, int64_t heads, int64_t valueHeads, Type dtype,
    bool initialState, bool finalState, bool varlen) {
  if (!dtype.isBF16() && !dtype.isF16() && !dtype.isF32())
    return emitError() << "dtype must be bf16, f16 or f32, got " << dtype;
  if (gateLowerBound && gate != ir::GateSource::lower_bound)
    return emitError() << "gate_lower_bound is only used with gate = "
                          "lower_bound; remove it or set gate = lower_bound";
  if (gateLowerBound && !gateLowerBound.getType().isF64())
    return emitError() << "gate_lower_bound must be an f64 literal, e.g. -5.0";
  if (scale && !scale.getType().isF64())
    return emitError() << "scale must be an f64 literal, e.g. 0.0883883";
  // Build the attribute-free spec and let the shared validator judge it.
  Spec spec = toSpec(SpecAttr::get(
      dtype.getContext(), decay, update, gate, gateLowerBound, beta, lowRankA,
      lowRankB, write, qkL2norm, scale, keyDim, valueDim, heads, valueHeads, dtype,
      initialState, finalState, varlen));
  std::vector<std::string> errors = validate(spec);
  if (!errors.empty())
    return emitError() << errors.front();
  return success();
}

LogicalResult
PlacementAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      ir::StateHome state, int64_t ring,
                      int64_t minCtas, int64_t parallelMinCtas) {
  // 1 to 3 buffers a fetched tile (the emitter's rings), or none fetched.
  if (ring < 0 || ring > 3)
    return emitError() << "placement: ring must be 0 (no fetch ahead), 1, 2 "
                          "or 3, got "
                       << ring;
  // An sm_90 multiprocessor holds at most 32 CTAs.
  if (minCtas < 0 || minCtas > 32)
    return emitError() << "placement: min_ctas must be 0 (no minimum) to 32, "
                          "got "
                       << minCtas;
  if (parallelMinCtas < 0 || parallelMinCtas > 32)
    return emitError() << "placement: parallel_min_ctas must be 0 (no "
                          "minimum) to 32, got "
                       << parallelMinCtas;
  return success();
}
