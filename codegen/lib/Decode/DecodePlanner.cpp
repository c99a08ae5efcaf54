//===- DecodePlanner.cpp - Spec + decode schedule -> DecodePlan --------===//
//
// Part of lina. The spec goes through the dialect as the chunk kernels' does
// (a lina.recurrence, verified, then lina-specialize), so a dplr spec tied to
// k decodes as the delta rule it is. The recurrent form needs no lowering
// beyond that: one token is one step of the spec's own equation, and there
// are no tiles to schedule, so the specialized spec is printed directly
// (docs/decode.md says why there is no lina.chunked-like level for it).
//
//===----------------------------------------------------------------------===//
#include "lina/Codegen/DecodePlanner.h"
#include "lina/Dialect/Lina/IR/SpecConversion.h"
#include "lina/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"

#include <algorithm>

using namespace mlir;

namespace lina {
namespace {

Status invalid(const std::string &message) {
  return Status::error(StatusCode::InvalidArgument, message);
}

/// The spec after lina-specialize, run on a lina.recurrence holding it.
Expected<Spec> specializeThroughDialect(const Spec &spec) {
  MLIRContext ctx;
  ctx.loadDialect<LinaDialect>();
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
    diagnostics += diag.str() + "\n";
    return success();
  });
  OwningOpRef<ModuleOp> module = buildSpecModule(ctx, spec);
  auto op = *module->getOps<RecurrenceOp>().begin();
  PassManager pm(&ctx);
  pm.addPass(createLinaSpecialize());
  if (failed(mlir::verify(*module)) || failed(pm.run(*module)))
    return invalid("invalid spec: " + diagnostics);
  Spec out = toSpec(op.getSpec());
  out.name = spec.name;
  return out;
}

std::string widthList(const std::vector<int64_t> &widths) {
  std::string list;
  for (int64_t w : widths)
    list += (list.empty() ? "" : ", ") + std::to_string(w);
  return list.empty() ? "none" : list;
}

} // namespace

Expected<DecodePlan> planDecodeKernel(const Spec &spec,
                                      const DecodeSchedule &schedule) {
  std::vector<std::string> problems = validate(spec);
  if (!problems.empty())
    return invalid("invalid spec: " + problems.front());
  if (spec.varlen)
    return invalid("a decode kernel takes packed sequences per call "
                   "(cu_seqlens in its arguments), not from the spec: set "
                   "varlen = false");
  if (spec.valueDim % 4 != 0)
    return invalid("decode moves 4 value columns at a time: value_dim (" +
                   std::to_string(spec.valueDim) + ") must be a multiple of 4");
  std::vector<int64_t> choices = decodeWarpColumnChoices(spec);
  if (choices.empty())
    return invalid("decode keeps the state in registers, at most 64 floats "
                   "per thread: key_dim (" +
                   std::to_string(spec.keyDim) + ") must be at most 512");
  if (schedule.warps < 0 || schedule.warps > 8)
    return invalid("decode warps per CTA must be 1 to 8 (0: default), got " +
                   std::to_string(schedule.warps));
  std::vector<int64_t> widths = choices;
  if (schedule.warpColumns != 0) {
    if (std::find(choices.begin(), choices.end(), schedule.warpColumns) ==
        choices.end())
      return invalid(
          "decode warp columns " + std::to_string(schedule.warpColumns) +
          " do not fit key_dim " + std::to_string(spec.keyDim) +
          " and value_dim " + std::to_string(spec.valueDim) +
          "; choose one of " + widthList(choices) + " (or 0: by batch size)");
    widths = {schedule.warpColumns};
  }
  Expected<Spec> specialized = specializeThroughDialect(spec);
  if (!specialized.ok())
    return specialized.status();

  DecodePlan plan;
  plan.spec = *specialized;
  plan.schedule = schedule;
  plan.warpColumns = widths;
  for (int64_t w : widths)
    plan.kernelNames.push_back("lina_decode_w" + std::to_string(w));
  plan.source =
      printDecodeSource(plan.spec, plan.warpColumns, plan.kernelNames);
  return plan;
}

} // namespace lina
