//===- Specialize.cpp - Rewrite a spec into a cheaper equal form -------===//
//
// Part of lina. A dplr transition D + b a^T whose vectors are tied to k is the
// delta rule, whose chunk algorithm needs two chunk x chunk products instead
// of four; one with a zero vector has no low-rank term at all: the additive
// rule, with the same write weight.
//
//===----------------------------------------------------------------------===//
#include "lina/Dialect/Lina/IR/SpecConversion.h"
#include "lina/Transforms/Passes.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "lina-specialize"

namespace lina {
#define GEN_PASS_DEF_LINASPECIALIZE
#include "lina/Transforms/Passes.h.inc"

namespace {

/// The cheapest spec computing the same recurrence as `s`.
Spec specialize(Spec s) {
  if (s.update != UpdateRule::DPLR)
    return s;
  bool noLowRank =
      s.lowRankA == LowRankSource::Zero || s.lowRankB == LowRankSource::Zero;
  if (noLowRank) {
    // b a^T = 0: only the decay and the write w k v^T remain, the additive
    // rule with the same write weight. A unit write drops beta, which only
    // a zeroed beta_key vector read.
    s.update = UpdateRule::Additive;
    if (s.write == WriteWeight::One)
      s.beta = BetaSource::None;
    s.lowRankA = s.lowRankB = LowRankSource::Input;
    return s;
  }
  if (s.lowRankA == LowRankSource::NegDecayedKey &&
      s.lowRankB == LowRankSource::BetaKey && s.write == WriteWeight::Beta) {
    // D - beta k (D k)^T = (I - beta k k^T) D, writing beta k v^T: exactly the
    // delta rule. (With write = one it is not, and stays dplr.)
    s.update = UpdateRule::Delta;
    s.lowRankA = s.lowRankB = LowRankSource::Input;
    s.write = WriteWeight::One;
  }
  return s;
}

struct LinaSpecializePass
    : public impl::LinaSpecializeBase<LinaSpecializePass> {
  void runOnOperation() override {
    getOperation().walk([&](RecurrenceOp op) {
      Spec before = toSpec(op.getSpec());
      Spec after = specialize(before);
      SpecAttr attr = toSpecAttr(op.getContext(), after);
      if (attr != op.getSpec()) {
        LLVM_DEBUG(llvm::dbgs() << "specialized @" << op.getSymName() << ": "
                                << op.getSpec() << " -> " << attr << "\n");
        op.setSpecAttr(attr);
        // A schedule lina-choose-schedule picked was picked for the spec
        // as it was: the rewritten one is chosen for afresh.
        op.removeChunkSizeAttr();
        op.removeScheduleAttr();
      }
    });
  }
};

} // namespace
} // namespace lina
