//===- WarpgroupScan.cpp - The additive scan generated as warpgroup products
//-===//
//
// Part of lina. See WarpgroupScan.h.
//
//===----------------------------------------------------------------------===//
#include "WarpgroupScan.h"
#include "SmCapacity.h"
#include "WgmmaScan.h"

#include "lina/Codegen/Passes.h"
#include "lina/Dialect/Lina/IR/SpecConversion.h"
#include "lina/Runtime/KernelForms.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <array>
#include <cstdio>

using namespace mlir;

namespace lina::cuda {

namespace {

/// The kernel's chunks (WarpgroupScan.cuh): 64 tokens.
constexpr int64_t kChunk = 64;
/// The delta rule's record a (chunk slot, value head): T = (I + A)^-1 as a
/// 64 x 64 box of mma_t in the 128-byte swizzle, in floats.
constexpr int64_t kSolveRecordFloats = kChunk * kChunk / 2;
/// Row stride of the prepare kernel's fp32 A and T (WarpgroupScan.cuh's
/// kWgSolveLd).
constexpr int64_t kSolveLd = 68;

constexpr std::pair<WarpgroupRole, llvm::StringLiteral> kRoleNames[] = {
    {WarpgroupRole::Fetch, "fetch"},
    {WarpgroupRole::Column, "column"},
    {WarpgroupRole::RowFactor, "row_factor"},
    {WarpgroupRole::Scores, "scores"},
    {WarpgroupRole::StateProduct, "state_product"},
    {WarpgroupRole::Intra, "intra"},
    {WarpgroupRole::Output, "output"},
    {WarpgroupRole::Store, "store"},
    {WarpgroupRole::Decay, "decay"},
    {WarpgroupRole::Update, "update"},
    {WarpgroupRole::Next, "next"},
    {WarpgroupRole::SolveMatrix, "solve_matrix"},
    {WarpgroupRole::ResidualProduct, "residual_product"},
    {WarpgroupRole::Residual, "residual"},
    {WarpgroupRole::Solve, "solve"},
    {WarpgroupRole::Prepared, "prepared"},
    {WarpgroupRole::Channel, "channel"},
    {WarpgroupRole::ResidualIntra, "residual_intra"},
    {WarpgroupRole::ScoresApart, "scores_apart"},
};

/// sizeof(wg_channel_smem<K, tiles>) (WarpgroupChannels.cuh): q's and k's
/// tiles (DPLR's a's and b's too), the gates, the right operand and the left
/// operand (fp32, rows of K + 4), P's image, the midpoints and factors, and
/// the refusal bits, rounded to the struct's 16-byte alignment.
int64_t channelSharedBytes(int64_t K, int64_t tiles) {
  // wg_channel_smem's left operands: two fp32 ones with four tiles.
  const int64_t leftFloats = tiles == 4 ? 2 * 16 * (K + 4) : 16 * (K + 8);
  return llvm::alignTo(tiles * kChunk * K * 2 + kChunk * K * 4 +
                           kChunk * (K + 4) * 4 + leftFloats * 4 +
                           2 * 4 * K * 4 + 4,
                       16);
}

/// The op that stands for a chain of rows in a record: its outermost
/// factor, or its load where it has none.
Operation *chainOp(const ScaledRows &rows) {
  return rows.factors.empty() ? LoadOp(rows.load).getOperation()
                              : rows.factors.front();
}

std::string floatLiteral(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.9ef", v);
  return text;
}

int64_t rowsOf(Value v) { return cast<TileType>(v.getType()).getRows(); }
int64_t colsOf(Value v) { return cast<TileType>(v.getType()).getCols(); }

const char *operandName(ir::Operand o) {
  switch (o) {
  case ir::Operand::q:
    return "q";
  case ir::Operand::k:
    return "k";
  case ir::Operand::v:
    return "v";
  case ir::Operand::a:
    return "a";
  case ir::Operand::b:
    return "b";
  default:
    return "an input";
  }
}

/// Sorts the chunk's ops into their parts (planWarpgroupScan).
class Planner {
public:
  Planner(ChunkedOp op, WarpgroupScan &scan)
      : op(op), scan(scan), spec(toSpec(op.getSpec())),
        lowRank(spec.update == UpdateRule::DPLR),
        aBase(baseOf(spec.lowRankA, ir::Operand::a)),
        bBase(baseOf(spec.lowRankB, ir::Operand::b)) {}

  std::string plan() {
    Block &body = op.getBody().front();
    if (body.getNumArguments() != 1)
      return "warpgroup scan: the chunk must carry one state (it carries " +
             std::to_string(body.getNumArguments()) + ")";
    state = body.getArgument(0);
    auto yield = cast<YieldOp>(body.getTerminator());
    if (yield->getNumOperands() != 1)
      return "warpgroup scan: the chunk must yield one state";
    if (!planUpdate(yield->getOperand(0)) || !planOutput())
      return error;
    if (lowRank && !scan.solve)
      return "warpgroup scan: a DPLR chunk must solve its values (U = "
             "tri_solve(-A, Y S + L V))";
    for (Operation &inner : body) {
      if (isa<YieldOp>(inner))
        continue;
      if (!scan.roles.count(&inner)) {
        fail(&inner, "has no part in the additive warpgroup scan (its "
                     "products, row factors and per-token columns)");
        return error;
      }
      if (scan.roles.lookup(&inner) == WarpgroupRole::Column)
        scan.columns.push_back(&inner);
    }
    if (spec.decay == DecayKind::PerChannel)
      planChannels();
    else if (lowRank)
      planLowRankGates();
    else if (scan.solve)
      planScoresApart();
    return error;
  }

private:
  ChunkedOp op;
  WarpgroupScan &scan;
  Spec spec;
  /// DPLR: the chunk writes U along b and v along k (WarpgroupScan's
  /// low-rank fields); a's and b's rows are their inputs' or, computed
  /// from k (beta_key), k's.
  bool lowRank;
  ir::Operand aBase, bBase;
  static ir::Operand baseOf(LowRankSource source, ir::Operand input) {
    return source == LowRankSource::Input ? input : ir::Operand::k;
  }
  Value state;
  std::string error;

  bool fail(Operation *at, const llvm::Twine &why) {
    if (error.empty())
      error = ("warpgroup scan: '" + at->getName().getStringRef() + "' " + why)
                  .str();
    return false;
  }
  void mark(Operation *inner, WarpgroupRole role) { scan.roles[inner] = role; }
  bool onlyUse(Value v, Operation *user, Operation *at) {
    if (v.hasOneUse() && *v.getUsers().begin() == user)
      return true;
    return fail(at, "must be read by one op only, its part's next");
  }

  /// A per-token value of one column computed from gates and betas.
  bool column(Value v) {
    Operation *def = v.getDefiningOp();
    if (!def)
      return fail(op, "reads the state where a per-token column belongs");
    if (scan.roles.count(def) &&
        scan.roles.lookup(def) == WarpgroupRole::Column)
      return true;
    if (spec.decay == DecayKind::PerChannel && rowsOf(v) == kChunk &&
        colsOf(v) == spec.keyDim)
      return channel(v);
    if (colsOf(v) != 1 || rowsOf(v) != kChunk)
      return fail(def, "must be one value a token (or, with a per-channel "
                       "decay, a value a token and key channel)");
    bool ok =
        llvm::TypeSwitch<Operation *, bool>(def)
            .Case([&](LoadOp load) {
              return load.getOperand() == ir::Operand::g ||
                     load.getOperand() == ir::Operand::beta ||
                     fail(def, "loads a tile where a per-token column "
                               "belongs");
            })
            .Case([&](CumsumOp o) { return column(o.getInput()); })
            .Case([&](BetaOp o) { return column(o.getInput()); })
            .Case([&](GateOp o) { return column(o.getInput()); })
            .Case([&](ScaleOp o) { return column(o.getInput()); })
            .Case([&](NegOp o) { return column(o.getInput()); })
            .Case([&](ZerosOp) { return true; })
            .Default([&](Operation *) {
              return fail(def, "is not a per-token op the warpgroup scan "
                               "evaluates (load, cumsum, beta, gate, scale, "
                               "neg, zeros)");
            });
    if (ok)
      mark(def, WarpgroupRole::Column);
    return ok;
  }

  /// A per-channel value: the log gates a token and key channel, each
  /// element computed from g alone, and their running sum.
  bool channel(Value v) {
    Operation *def = v.getDefiningOp();
    if (!def)
      return fail(op, "reads the state where the per-channel gates belong");
    if (scan.roles.count(def) &&
        scan.roles.lookup(def) == WarpgroupRole::Channel)
      return true;
    bool ok =
        llvm::TypeSwitch<Operation *, bool>(def)
            .Case([&](LoadOp load) {
              return load.getOperand() == ir::Operand::g ||
                     fail(def, "loads a tile where the per-channel gates "
                               "belong");
            })
            .Case([&](CumsumOp o) {
              // DPLR's a decays to the row before: G's exclusive twin.
              Value &sums = lowRank && o.getExclusive() ? scan.channelSumsBefore
                                                        : scan.channelSums;
              if (sums && sums != o.getResult())
                return fail(def, "sums the per-channel gates a second time");
              sums = o.getResult();
              return channel(o.getInput());
            })
            .Case([&](GateOp o) { return channel(o.getInput()); })
            .Case([&](ScaleOp o) { return channel(o.getInput()); })
            .Case([&](NegOp o) { return channel(o.getInput()); })
            .Default([&](Operation *) {
              return fail(def, "is not a per-channel gate op the warpgroup "
                               "scan's prepare kernel evaluates (load, "
                               "cumsum, gate, scale, neg)");
            });
    if (ok)
      mark(def, WarpgroupRole::Channel);
    return ok;
  }

  /// A per-channel decay's chunk: every decay reads the gates' running sum
  /// G itself, summed from elementwise gates; the scores' operands carry
  /// no decay of their own; and the factors of q's, k's and v's rows go to
  /// the prepare kernel, which stores the scan's operands with them applied.
  void planChannels() {
    if (!error.empty())
      return;
    const bool noDecay =
        isa_and_nonnull<ZerosOp>(scan.channelSums.getDefiningOp());
    if (!scan.channelSums || (!scan.decay && !noDecay)) {
      fail(op, "has a per-channel decay but no running sum of its gates "
               "that the state's decay reads");
      return;
    }
    // DPLR's exclusive twin of G sums the same gates.
    if (scan.channelSumsBefore) {
      auto before = scan.channelSumsBefore.getDefiningOp<CumsumOp>();
      auto sums = scan.channelSums.getDefiningOp<CumsumOp>();
      if (!before || !sums || before.getInput() != sums.getInput() ||
          !before.getExclusive() || sums.getExclusive()) {
        fail(before ? before.getOperation() : op.getOperation(),
             "must sum the gates G sums, to the row before where G sums to "
             "the row");
        return;
      }
    }
    // The per-channel decays' gate operands, each of which must be G, or
    // G's exclusive twin where a row decays to the row before (a strictly
    // masked decay_product's left rows, a decay_rows to the row).
    llvm::SmallVector<std::tuple<Operation *, Value, bool>, 6> channelReads;
    for (Operation &inner : op.getBody().front()) {
      if (auto decayed = dyn_cast<DecayRowsOp>(inner);
          decayed && colsOf(decayed.getLogGates()) != 1)
        channelReads.push_back(
            {decayed, decayed.getLogGates(), !decayed.getToEnd()});
      else if (auto product = dyn_cast<DecayProductOp>(inner)) {
        channelReads.push_back({product, product.getLhsGates(),
                                product.getMask() == ir::Mask::strict});
        channelReads.push_back({product, product.getRhsGates(), false});
      } else if (auto decay = dyn_cast<DecayStateOp>(inner)) {
        channelReads.push_back({decay, decay.getLogGates(), false});
      }
    }
    for (auto [reader, gates, before] : channelReads) {
      if (gates == scan.channelSums ||
          (before && scan.channelSumsBefore && gates == scan.channelSumsBefore))
        continue;
      fail(reader, "must read the per-channel gates' running sum itself "
                   "(or, decaying a row to the row before, its exclusive "
                   "twin)");
      return;
    }
    for (Operation *f : llvm::concat<Operation *const>(
             scan.scoresLhs.factors, scan.scoresRhs.factors,
             scan.solveLhs.factors, scan.solveRhs.factors,
             scan.directScoresLhs.factors, scan.directScoresRhs.factors,
             scan.residualScoresLhs.factors, scan.residualScoresRhs.factors))
      if (auto decayed = dyn_cast<DecayRowsOp>(f);
          decayed && colsOf(decayed.getLogGates()) != 1) {
        fail(f, "decays a row of the scores' operands per channel (the "
                "scores' decay_product decays them)");
        return;
      }
    for (Operation *f : llvm::concat<Operation *const>(
             scan.intraRhs.factors, scan.updateRhs.factors,
             scan.residualValues.factors, scan.directIntraRhs.factors,
             scan.directUpdateRhs.factors, scan.residualIntraRhs.factors))
      if (isa<DecayRowsOp>(f)) {
        fail(f, "decays v's rows (the printed scans decay q's and k's)");
        return;
      }
    for (ScaledRows *rows :
         {&scan.scoresLhs, &scan.scoresRhs, &scan.stateLhs, &scan.updateLhs,
          &scan.intraRhs, &scan.updateRhs, &scan.residualKeys,
          &scan.residualValues, &scan.solveLhs, &scan.solveRhs,
          &scan.directScoresLhs, &scan.directScoresRhs, &scan.directIntraRhs,
          &scan.directUpdateLhs, &scan.directUpdateRhs, &scan.residualScoresLhs,
          &scan.residualScoresRhs, &scan.residualIntraRhs})
      for (Operation *f : rows->factors)
        mark(f, WarpgroupRole::Prepared);
    for (LoadOp load : {scan.q, scan.k, scan.a, scan.b})
      if (load)
        mark(load, WarpgroupRole::Prepared);
  }

  /// The delta rule with at most a scalar decay on a 64-column value tile
  /// of eight warps: the scores go to the second warpgroup
  /// (WarpgroupScan::scoresApart).
  void planScoresApart() {
    std::optional<ScheduleAttr> schedule = op.getSchedule();
    if (!schedule || !tileHasSecondWarpgroup(schedule->getTileV(),
                                             32 * schedule->getWarps()))
      return;
    scan.scoresApart = true;
    scan.roles[scan.scores] = WarpgroupRole::ScoresApart;
  }

  /// A DPLR chunk with a scalar, fixed or no decay runs the per-channel
  /// pair too: the prepare kernel sums its gates (a value a token) over
  /// the key channels alike, and its decays of rows are row factors.
  void planLowRankGates() {
    if (!error.empty())
      return;
    scan.channelSums =
        scan.decay ? scan.decay.getLogGates() : scan.solveScores.getRhsGates();
    if (scan.solveScores.getLhsGates() != scan.channelSums)
      scan.channelSumsBefore = scan.solveScores.getLhsGates();
    planChannels();
  }

  /// `v` as the rows of fetched tile `base` times row factors.
  bool rows(Value v, ir::Operand base, ScaledRows &out) {
    Operation *def = v.getDefiningOp();
    if (!def)
      return fail(op, llvm::Twine("reads the state where rows of ") +
                          operandName(base) + " belong");
    if (auto load = dyn_cast<LoadOp>(def)) {
      if (load.getOperand() != base)
        return fail(def,
                    llvm::Twine("loads ") + operandName(load.getOperand()) +
                        " where the warpgroup scan reads " + operandName(base));
      LoadOp &seen = base == ir::Operand::q   ? scan.q
                     : base == ir::Operand::k ? scan.k
                     : base == ir::Operand::a ? scan.a
                     : base == ir::Operand::b ? scan.b
                                              : scan.v;
      if (seen && seen != load)
        return fail(def, llvm::Twine("loads ") + operandName(base) +
                             " a second time");
      if (rowsOf(v) != kChunk || (colsOf(v) != 64 && colsOf(v) != 128))
        return fail(def, "must load 64 rows of 64 or 128 columns");
      seen = load;
      out.load = load;
      mark(def, WarpgroupRole::Fetch);
      return true;
    }
    Value input;
    if (auto norm = dyn_cast<L2NormOp>(def)) {
      // A row's own norm, computed from the fetched tile it normalises.
      input = norm.getInput();
      auto load = dyn_cast_or_null<LoadOp>(input.getDefiningOp());
      if (!load || load.getOperand() != base)
        return fail(def, llvm::Twine("must normalise the fetched ") +
                             operandName(base) + " itself");
    } else if (auto scale = dyn_cast<ScaleOp>(def)) {
      input = scale.getInput();
    } else if (auto negated = dyn_cast<NegOp>(def)) {
      // A factor of -1 (DPLR's neg_decayed_key).
      input = negated.getInput();
    } else if (auto scaled = dyn_cast<ScaleRowsOp>(def)) {
      if (!column(scaled.getWeights()))
        return false;
      input = scaled.getInput();
    } else if (auto decayed = dyn_cast<DecayRowsOp>(def)) {
      if (!column(decayed.getLogGates()))
        return false;
      input = decayed.getInput();
    } else {
      return fail(def, llvm::Twine("is not a row scaling of ") +
                           operandName(base) +
                           " (l2norm, scale, neg, scale_rows, decay_rows)");
    }
    out.factors.push_back(def);
    mark(def, WarpgroupRole::RowFactor);
    return rows(input, base, out);
  }

  /// The chunk's values: v's rows (the additive rule; `rowsOfV` gets their
  /// factors), or the delta rule's U = tri_solve(A, X - Y S).
  bool values(Value u, ScaledRows &rowsOfV) {
    auto solve = dyn_cast_or_null<TriSolveOp>(u.getDefiningOp());
    if (auto twoSolves = dyn_cast_or_null<SubOp>(u.getDefiningOp());
        twoSolves && twoSolves.getLhs().getDefiningOp<TriSolveOp>())
      return fail(twoSolves, "takes the difference of two solves, which the "
                             "scan makes one solve of the residual (run "
                             "-lina-solve-residual)");
    if (!solve)
      return rows(u, ir::Operand::v, rowsOfV);
    if (scan.solve)
      return scan.solve == solve ||
             fail(solve, "solves the chunk a second time");
    scan.solve = solve;
    mark(solve, WarpgroupRole::Solve);
    if (lowRank) {
      if (!lowRankResidual(solve))
        return false;
      return solveMatrix(solve, aBase, bBase);
    }
    auto residual = dyn_cast_or_null<SubOp>(solve.getRhs().getDefiningOp());
    auto product =
        residual ? dyn_cast_or_null<MatmulOp>(residual.getRhs().getDefiningOp())
                 : MatmulOp();
    if (!residual || !product || product.getTransposeLhs() ||
        product.getRhs() != state)
      return fail(solve, "must solve the residual X - Y S "
                         "(run -lina-solve-residual)");
    if (!onlyUse(residual.getResult(), solve, residual) ||
        !onlyUse(product.getResult(), residual, product))
      return false;
    mark(residual, WarpgroupRole::Residual);
    mark(product, WarpgroupRole::ResidualProduct);
    scan.residualProduct = product;
    if (!rows(residual.getLhs(), ir::Operand::v, scan.residualValues) ||
        !rows(product.getLhs(), ir::Operand::k, scan.residualKeys))
      return false;
    return solveMatrix(solve, ir::Operand::k, ir::Operand::k);
  }

  /// A of `solve`: a strictly masked decay_product of `lhs`'s and `rhs`'s
  /// rows (k's; DPLR's a and b), its rows weighted, negated or both.
  bool solveMatrix(TriSolveOp solve, ir::Operand lhs, ir::Operand rhs) {
    Value a = solve.getLower();
    while (isa_and_nonnull<ScaleRowsOp, NegOp>(a.getDefiningOp())) {
      Operation *def = a.getDefiningOp();
      if (!def->getResult(0).hasOneUse())
        return fail(def, "must be read by one op only, its part's next");
      mark(def, WarpgroupRole::SolveMatrix);
      if (auto weighted = dyn_cast<ScaleRowsOp>(def)) {
        if (!column(weighted.getWeights()))
          return false;
        scan.solveRowWeights.push_back(weighted.getWeights());
      } else {
        scan.solveNegated = !scan.solveNegated;
      }
      a = def->getOperand(0);
    }
    auto scores = dyn_cast_or_null<DecayProductOp>(a.getDefiningOp());
    if (!scores || scores.getMask() != ir::Mask::strict) {
      const std::string operands =
          lhs == rhs ? std::string(operandName(lhs)) + "'s rows"
                     : std::string(operandName(lhs)) + "'s and " +
                           operandName(rhs) + "'s rows";
      return fail(solve, "must solve with a strictly masked decay_product of " +
                             operands);
    }
    mark(scores, WarpgroupRole::SolveMatrix);
    scan.solveScores = scores;
    return rows(scores.getLhs(), lhs, scan.solveLhs) &&
           rows(scores.getRhs(), rhs, scan.solveRhs) &&
           column(scores.getLhsGates()) && column(scores.getRhsGates());
  }

  /// DPLR's residual, Y S + L V: Y a's rows decayed to the row before, L a
  /// strictly masked decay_product of a's and k's rows.
  bool lowRankResidual(TriSolveOp solve) {
    auto residual = dyn_cast_or_null<AddOp>(solve.getRhs().getDefiningOp());
    if (!residual)
      return fail(solve, "must solve the residual Y S + L V "
                         "(run -lina-solve-residual)");
    MatmulOp product, intra;
    for (Value term : {residual.getLhs(), residual.getRhs()}) {
      auto m = dyn_cast_or_null<MatmulOp>(term.getDefiningOp());
      if (m && !m.getTransposeLhs() && m.getRhs() == state && !product)
        product = m;
      else if (m && !m.getTransposeLhs() &&
               m.getLhs().getDefiningOp<DecayProductOp>() && !intra)
        intra = m;
    }
    if (!product || !intra)
      return fail(solve, "must solve the residual Y S + L V "
                         "(run -lina-solve-residual)");
    if (!onlyUse(residual.getResult(), solve, residual) ||
        !onlyUse(product.getResult(), residual, product) ||
        !onlyUse(intra.getResult(), residual, intra))
      return false;
    auto scores = intra.getLhs().getDefiningOp<DecayProductOp>();
    if (scores.getMask() != ir::Mask::strict)
      return fail(scores, "must mask the residual's scores strictly");
    if (!onlyUse(scores.getResult(), intra, scores))
      return false;
    mark(residual, WarpgroupRole::Residual);
    mark(product, WarpgroupRole::ResidualProduct);
    mark(intra, WarpgroupRole::ResidualIntra);
    mark(scores, WarpgroupRole::Scores);
    scan.residualProduct = product;
    scan.residualIntra = intra;
    scan.residualScores = scores;
    return rows(product.getLhs(), aBase, scan.residualKeys) &&
           rows(scores.getLhs(), aBase, scan.residualScoresLhs) &&
           rows(scores.getRhs(), ir::Operand::k, scan.residualScoresRhs) &&
           column(scores.getLhsGates()) && column(scores.getRhsGates()) &&
           rows(intra.getRhs(), ir::Operand::v, scan.residualIntraRhs);
  }

  /// The terms of the sum `v` (its add ops, each read by the next alone,
  /// marked `role`) into `terms`; false where `v` is no add.
  bool sumTerms(Value v, WarpgroupRole role,
                llvm::SmallVectorImpl<Value> &terms) {
    auto add = dyn_cast_or_null<AddOp>(v.getDefiningOp());
    if (!add)
      return false;
    mark(add, role);
    for (Value term : {add.getLhs(), add.getRhs()}) {
      auto inner = dyn_cast_or_null<AddOp>(term.getDefiningOp());
      if (inner && !onlyUse(term, add, inner))
        return false;
      if (!inner || !sumTerms(term, role, terms))
        terms.push_back(term);
    }
    return error.empty();
  }

  /// Whether `v` is the delta rule's or DPLR's values (a solve), not v's
  /// rows.
  static bool solved(Value v) {
    return static_cast<bool>(v.getDefiningOp<TriSolveOp>());
  }

  bool planUpdate(Value next) {
    llvm::SmallVector<Value, 3> terms;
    if (!sumTerms(next, WarpgroupRole::Next, terms))
      return error.empty()
                 ? fail(next.getDefiningOp() ? next.getDefiningOp() : op,
                        "must yield the decayed state plus K~^T V")
                 : false;
    Operation *sum = next.getDefiningOp();
    Value kept;
    llvm::SmallVector<MatmulOp, 2> updates;
    for (Value term : terms) {
      auto update = dyn_cast_or_null<MatmulOp>(term.getDefiningOp());
      if (update && update.getTransposeLhs())
        updates.push_back(update);
      else if (!kept)
        kept = term;
      else
        return fail(sum, "must add the product K~^T V to the state");
    }
    if (updates.size() != (lowRank ? 2u : 1u))
      return fail(sum, lowRank ? "must add B~^T U and K~^T V to the state"
                               : "must add the product K~^T V to the state");
    if (!kept)
      return fail(sum, "must add the update to the state or its decay");
    if (lowRank && llvm::count_if(updates, [](MatmulOp u) {
                     return solved(u.getRhs());
                   }) != 1)
      return fail(sum, "must add B~^T U, U one solve a chunk (run "
                       "-lina-solve-residual), and K~^T V");
    if (kept != state) {
      auto decay = dyn_cast_or_null<DecayStateOp>(kept.getDefiningOp());
      if (!decay || decay.getState() != state)
        return fail(sum, "must add the update to the state or its decay");
      if (!column(decay.getLogGates()) || !decay.getResult().hasOneUse())
        return fail(decay, "must be read by one op only, its part's next");
      mark(decay, WarpgroupRole::Decay);
      scan.decay = decay;
    }
    for (MatmulOp update : updates) {
      if (!update.getResult().hasOneUse())
        return fail(update, "must be read by one op only, its part's next");
      mark(update, WarpgroupRole::Update);
      // DPLR: U's update along b, v's along k.
      if (lowRank && !solved(update.getRhs())) {
        scan.directUpdate = update;
        if (!rows(update.getLhs(), ir::Operand::k, scan.directUpdateLhs) ||
            !rows(update.getRhs(), ir::Operand::v, scan.directUpdateRhs))
          return false;
        continue;
      }
      if (scan.update)
        return fail(update, "updates the state with the values a second time");
      scan.update = update;
      if (!rows(update.getLhs(), lowRank ? bBase : ir::Operand::k,
                scan.updateLhs) ||
          !values(update.getRhs(), scan.updateRhs))
        return false;
    }
    return true;
  }

  bool planOutput() {
    Block &body = op.getBody().front();
    for (Operation &inner : body)
      if (auto store = dyn_cast<StoreOp>(inner)) {
        if (scan.store)
          return fail(store, "stores a second output");
        scan.store = store;
      }
    if (!scan.store)
      return fail(op, "stores no output");
    mark(scan.store, WarpgroupRole::Store);
    Value stored = scan.store.getValue();
    llvm::SmallVector<Value, 3> terms;
    if (!sumTerms(stored, WarpgroupRole::Output, terms))
      return error.empty() ? fail(scan.store, "must store X S + P V") : false;
    Operation *sum = stored.getDefiningOp();
    if (!onlyUse(stored, scan.store, sum))
      return false;
    for (Value term : terms) {
      auto product = dyn_cast_or_null<MatmulOp>(term.getDefiningOp());
      if (!product || product.getTransposeLhs())
        return fail(sum, "must add two products, X S and P V");
      // Read by the sum's add that holds it (sumTerms).
      if (!product.getResult().hasOneUse())
        return fail(product, "must be read by one op only, its part's next");
      if (product.getRhs() == state) {
        if (scan.stateProduct)
          return fail(product, "multiplies the state a second time");
        scan.stateProduct = product;
        mark(product, WarpgroupRole::StateProduct);
        if (!rows(product.getLhs(), ir::Operand::q, scan.stateLhs))
          return false;
        continue;
      }
      auto scores =
          dyn_cast_or_null<DecayProductOp>(product.getLhs().getDefiningOp());
      // DPLR: P U with q's and b's scores, P V with q's and k's.
      const bool direct = lowRank && !solved(product.getRhs());
      if (!scores || (direct ? scan.directIntra : scan.intra))
        return fail(product, "must be X S or P V with P a decay_product");
      mark(product, WarpgroupRole::Intra);
      mark(scores, WarpgroupRole::Scores);
      if (!onlyUse(scores.getResult(), product, scores) ||
          !column(scores.getLhsGates()) || !column(scores.getRhsGates()))
        return false;
      if (direct) {
        scan.directIntra = product;
        scan.directScores = scores;
        if (!rows(product.getRhs(), ir::Operand::v, scan.directIntraRhs) ||
            !rows(scores.getLhs(), ir::Operand::q, scan.directScoresLhs) ||
            !rows(scores.getRhs(), ir::Operand::k, scan.directScoresRhs))
          return false;
        continue;
      }
      scan.intra = product;
      scan.scores = scores;
      if (!values(product.getRhs(), scan.intraRhs) ||
          !rows(scores.getLhs(), ir::Operand::q, scan.scoresLhs) ||
          !rows(scores.getRhs(), lowRank ? bBase : ir::Operand::k,
                scan.scoresRhs))
        return false;
    }
    if (!scan.stateProduct || !scan.intra || (lowRank && !scan.directIntra))
      return fail(sum, lowRank ? "must add X S, P U and P V"
                               : "must add X S and P V");
    return true;
  }
};

/// The rows of k with their factors that the scan's products read: the
/// scores' keys, the residual's Y and the update's K~ (the chains the
/// delta record may carry whole, planWarpgroupRecord).
std::array<const ScaledRows *, 3> keyRowsOfProducts(const WarpgroupScan &scan) {
  return {&scan.scoresRhs, &scan.residualKeys, &scan.updateLhs};
}

/// Prints the kernel from a planned chunk.
class Printer {
public:
  Printer(llvm::raw_ostream &os, WarpgroupScan &scan, const Spec &spec,
          std::string &error, int64_t tileV, int64_t threads,
          llvm::DenseMap<Operation *, int64_t> groups,
          llvm::DenseMap<Operation *, int64_t> record)
      : os(os), scan(scan), spec(spec), error(error), tileV(tileV),
        threads(threads), groups(std::move(groups)), record(std::move(record)) {
    for (auto [index, column] : llvm::enumerate(scan.columns))
      columnIndex[column->getResult(0)] = index;
    // With a per-channel decay the prepare kernel computes every column.
    if (scan.perChannel())
      return;
    // The columns the scan kernel computes: those its ops read that the
    // record does not carry, and the columns they are computed from.
    for (Operation *column : llvm::reverse(scan.columns)) {
      if (this->record.count(column))
        continue;
      if (llvm::any_of(column->getUsers(), [&](Operation *user) {
            WarpgroupRole role = scan.roles.lookup(user);
            return scanComputes.count(user) ||
                   (role != WarpgroupRole::Column &&
                    role != WarpgroupRole::SolveMatrix);
          }))
        scanComputes.insert(column);
    }
    for (Operation *column : scan.columns)
      if (perTokenInput(column) && scanComputes.count(column)) {
        int64_t slot = raw.size();
        raw[column] = slot;
      }
  }

  int64_t print(const std::string &name, bool segments);
  /// The delta rule's prepare kernel: T = (I + A)^-1 a (chunk, value head).
  int64_t printPrepare(const std::string &name);
  /// A per-channel decay's kernels (WarpgroupChannels.cuh): the prepare
  /// kernel stores the scan's operands a (chunk, value head), the scan
  /// reads them with v's tile.
  int64_t printChannelPrepare(const std::string &name);
  int64_t printChannelScan(const std::string &name);

private:
  llvm::raw_ostream &os;
  WarpgroupScan &scan;
  const Spec &spec;
  std::string &error;
  /// The value columns a CTA holds (the schedule's tile-v): the head's, or
  /// a 64-column tile of them.
  int64_t tileV;
  /// The CTA's threads (the schedule's warps): a warpgroup for each 64 of
  /// its value columns, and on a 64-column tile of eight warps a second
  /// one (tileHasSecondWarpgroup).
  int64_t threads;
  llvm::DenseMap<Value, int64_t> columnIndex;
  /// The scan's products' commit groups (lina-warpgroup-groups').
  llvm::DenseMap<Operation *, int64_t> groups;
  /// The wait after `issued` groups for `products`' to have landed: the
  /// groups issued after the last of them may stay in flight.
  std::string waitFor(std::initializer_list<Operation *> products,
                      int64_t issued) {
    int64_t last = 0;
    for (Operation *product : products)
      last = std::max(last, groups.lookup(product));
    return llvm::formatv("    wg_wait<{0}>();\n", issued - 1 - last);
  }
  /// Printing the prepare kernel: per-token inputs are read from global
  /// memory where the chunk starts, not from a stage's copies.
  bool preparing = false;
  /// The values the prepare kernel stores in the chunk's record after T
  /// (lina-warpgroup-record's slots): columns, k's rows' norms and the
  /// products of chains of k's row factors (on their outermost op).
  llvm::DenseMap<Operation *, int64_t> record;
  /// Whether the scan reads `op`'s value from the chunk's record.
  bool recorded(Operation *op) const { return !preparing && record.count(op); }
  /// The columns the scan kernel computes (the prepare kernel computes
  /// every column).
  llvm::SmallPtrSet<Operation *, 8> scanComputes;
  /// Whether `column` reads a per-token input (a gate or a beta a token),
  /// not a value a head.
  bool perTokenInput(Operation *column) const {
    auto load = dyn_cast<LoadOp>(column);
    return load && !(load.getOperand() == ir::Operand::g &&
                     spec.decay == DecayKind::FixedPerHead);
  }
  /// Per-token inputs the scan copies into a stage's raw columns (their
  /// slot).
  llvm::DenseMap<Operation *, int64_t> raw;
  /// The record's values in their slots' order.
  llvm::SmallVector<std::pair<int64_t, Operation *>, 4> recordBySlot() const {
    llvm::SmallVector<std::pair<int64_t, Operation *>, 4> slots;
    for (auto [value, slot] : record)
      slots.push_back({slot, value});
    llvm::sort(slots, llvm::less_first());
    return slots;
  }
  /// The name of the chunk's record values in the scan: `op`'s slot's 64
  /// floats where the stage landed.
  std::string recordRows(Operation *op) const {
    return llvm::formatv("rec{0}", record.lookup(op));
  }
  /// Columns read by row (a table each) or at the chunk's last token.
  llvm::SetVector<int64_t> tables, lasts;

  /// Whether `column` is zero in every row (no decay: lina-chunk's zero
  /// gates, their running sums): its exponentials are ones, left out.
  static bool isZero(Value column) {
    Operation *def = column.getDefiningOp();
    if (isa_and_nonnull<ZerosOp>(def))
      return true;
    if (isa_and_nonnull<CumsumOp, ScaleOp, NegOp>(def))
      return isZero(def->getOperand(0));
    return false;
  }
  /// exp(column[row]), or with `toEnd` exp(column at the chunk's last token
  /// - column[row]); 1 where the column is zero.
  std::string decay(Value column, llvm::StringRef row, bool toEnd = false) {
    if (isZero(column))
      return "1.0f";
    return toEnd ? "__expf(" + last(column) + " - " + table(column, row) + ")"
                 : "__expf(" + table(column, row) + ")";
  }
  /// The l2norm ops whose rows' norms the chunk computes (a table each in
  /// shared memory).
  llvm::SetVector<Operation *> norms;
  int64_t normSlot(L2NormOp norm) {
    norms.insert(norm);
    return llvm::find(norms, norm.getOperation()) - norms.begin();
  }
  std::string table(Value column, llvm::StringRef row) {
    if (recorded(column.getDefiningOp()))
      return llvm::formatv("{0}[{1}]", recordRows(column.getDefiningOp()), row);
    int64_t index = columnIndex.lookup(column);
    tables.insert(index);
    return llvm::formatv("tab{0}[{1}]", index, row);
  }
  std::string last(Value column) {
    if (recorded(column.getDefiningOp()))
      return recordRows(column.getDefiningOp()) + "[n - 1]";
    int64_t index = columnIndex.lookup(column);
    lasts.insert(index);
    return llvm::formatv("last{0}", index);
  }

  /// The product of `terms` (factor's), "1.0f" for none.
  static std::string product(llvm::ArrayRef<std::string> terms) {
    std::string out;
    for (const std::string &term : terms)
      if (term != "1.0f")
        out += (out.empty() ? "" : " * ") + term;
    return out.empty() ? "1.0f" : out;
  }

  /// The product of `rows`' factors at row `r`.
  std::string factor(const ScaledRows &rows, llvm::StringRef r) {
    // A chain the record carries whole (k's norms alone among them): its
    // product a row.
    if (!rows.factors.empty() && recorded(rows.factors.front()))
      return llvm::formatv("{0}[{1}]", recordRows(rows.factors.front()), r);
    llvm::SmallVector<std::string, 4> terms;
    for (Operation *f : rows.factors) {
      if (auto norm = dyn_cast<L2NormOp>(f))
        terms.push_back(
            llvm::formatv("norms[{0} * 64 + {1}]", normSlot(norm), r));
      else if (auto scale = dyn_cast<ScaleOp>(f))
        terms.push_back(floatLiteral(scale.getFactor().convertToDouble()));
      else if (isa<NegOp>(f))
        terms.push_back("-1.0f");
      else if (auto scaled = dyn_cast<ScaleRowsOp>(f))
        terms.push_back(table(scaled.getWeights(), r));
      else if (auto decayed = dyn_cast<DecayRowsOp>(f))
        terms.push_back(decay(decayed.getLogGates(), r, decayed.getToEnd()));
    }
    return product(terms);
  }

  std::string columnExpression(Operation *column);

  /// The exponents of a chain's per-channel decays (wg_channel_rows'): of
  /// G at the row (each decay to the row: 1; from it to the chunk's end:
  /// -1), at the chunk's end (1 from the row to the end) and at the row
  /// before (each decay to the row before: DPLR's a).
  struct ChannelExponents {
    int row = 0, end = 0, before = 0;
    std::string arguments() const {
      return llvm::formatv("{0}, {1}, {2}", row, end, before);
    }
  };
  /// The product of `rows`' factors at row r but its per-channel decays,
  /// whose exponents go to `e`.
  std::string channelFactor(const ScaledRows &rows, llvm::StringRef r,
                            ChannelExponents &e) {
    ScaledRows scalar;
    scalar.load = rows.load;
    for (Operation *f : rows.factors) {
      auto decayed = dyn_cast<DecayRowsOp>(f);
      if (!decayed || colsOf(decayed.getLogGates()) == 1) {
        scalar.factors.push_back(f);
        continue;
      }
      if (scan.channelSumsBefore &&
          decayed.getLogGates() == scan.channelSumsBefore)
        ++e.before;
      else
        e.row += decayed.getToEnd() ? -1 : 1;
      e.end += decayed.getToEnd() ? 1 : 0;
    }
    return factor(scalar, r);
  }
  /// Whether `scores`' left rows decay to the row before (G's exclusive
  /// twin: DPLR's low-rank scores).
  bool decaysToRowBefore(DecayProductOp scores) const {
    return scan.channelSumsBefore &&
           scores.getLhsGates() == scan.channelSumsBefore;
  }
  /// The per-channel gate at row r and key channel c before its running
  /// sum: `v`, an elementwise op of g (planChannels), whose value there is
  /// x (wg_channel_gates').
  std::string channelInput(Value v) {
    Operation *def = v.getDefiningOp();
    return llvm::TypeSwitch<Operation *, std::string>(def)
        .Case([&](GateOp o) -> std::string {
          const std::string x =
              "(" + channelInput(o.getInput()) + " + gate_bias_at(c))";
          if (o.getSource() == ir::GateSource::softplus)
            return "-gate_a * softplus" + x;
          return floatLiteral(o.getLowerBound()->convertToDouble()) +
                 " * sigmoid(gate_a * " + x + ")";
        })
        .Case([&](ScaleOp o) {
          return "(" + channelInput(o.getInput()) + ") * " +
                 floatLiteral(o.getFactor().convertToDouble());
        })
        .Case([&](NegOp o) { return "-(" + channelInput(o.getInput()) + ")"; })
        .Default([&](Operation *) -> std::string { return "x"; });
  }
  /// The prepare kernel's tile of q's (0), k's (1), a's (2) or b's (3)
  /// rows.
  std::string rowsTile(LoadOp load) const {
    return load == scan.q   ? "sm.tiles[0]"
           : load == scan.k ? "sm.tiles[1]"
           : load == scan.a ? "sm.tiles[2]"
                            : "sm.tiles[3]";
  }
  /// A 64 x 64 box of scores straight into the record at `offset` (zero
  /// above the diagonal): `scores` of `lhs`'s and `rhs`'s rows times `f` (at
  /// rows t and u). Every thread, after the gates' barrier.
  void printScoresBox(DecayProductOp scores, const ScaledRows &lhs,
                      const ScaledRows &rhs, const std::string &f,
                      int64_t offset) {
    os << llvm::formatv("  wg_zero_box_above(record + {0});\n", offset);
    printScores(rhs, {scoresBox(scores, lhs, f, recordPut(offset))});
  }
  /// A box of wg_channel_scores: `scores` of `lhs`'s rows times `f` (at
  /// rows t and u), each pair of elements to `put` (a statement of t, u, x0
  /// and x1).
  std::string scoresBox(DecayProductOp scores, const ScaledRows &lhs,
                        const std::string &f, const std::string &put) {
    return llvm::formatv(
        "{4}({0}, {1}, [&](int t, int u) {{ return {2}; "
        "}, [&](int t, int u, float x0, float x1) {{ {3} })",
        rowsTile(lhs.load),
        scores.getMask() == ir::Mask::strict ? "true" : "false", f, put,
        decaysToRowBefore(scores) ? "wg_box_before" : "wg_box");
  }
  static std::string recordPut(int64_t offset) {
    return llvm::formatv("wg_put_box(record + {0}, t, u, x0, x1);", offset);
  }
  /// wg_channel_scores of `boxes` (scoresBox: each says how its left rows
  /// decay) against `rhs`'s rows.
  void printScores(const ScaledRows &rhs, llvm::ArrayRef<std::string> boxes) {
    printRightOperand(rowsTile(rhs.load));
    os << llvm::formatv("  wg_channel_scores<K{0}>(sm, {1}, n,\n      "
                        "{2});\n",
                        bf16Scores() ? ", true" : "", rowsTile(rhs.load),
                        llvm::join(boxes, ",\n      "));
  }
  /// Whether wg_channel_scores fits two left operands beside each other:
  /// in bf16, or in fp32 with a DPLR chunk's four tiles
  /// (wg_channel_smem's left).
  bool twoLeftOperands() const { return bf16Scores() || scan.lowRank(); }

  /// Whether the per-channel scores are bf16 products (wg_channel_scores'
  /// Bf16): for bf16 inputs, but not DPLR's, whose low-rank scores
  /// cancel.
  bool bf16Scores() const {
    return spec.dtype == DType::BF16 && !scan.lowRank();
  }
  /// The tile whose scores' right operand sm.right holds ("" for none):
  /// scores against the same right tile one after another form it once.
  std::string formedRight;
  void printRightOperand(const std::string &tile) {
    if (tile == formedRight)
      return;
    os << llvm::formatv("  wg_channel_right<K>(sm, {0});\n", tile);
    formedRight = tile;
  }

  /// Row factors evaluated once a row into a warp's table (their
  /// expressions at row r), for loops that read them once an element.
  std::vector<std::string> factorTables;
  /// A row factor at `row` (`at` prints it at a given row): printed there
  /// where it costs no more than a load, else a lookup in the table of it at
  /// row r. Each accumulator column or 16-byte piece of a tile reads its
  /// row's factor, so an exponential or a product of several terms is paid
  /// once a row, not once an element.
  std::string tabulated(llvm::function_ref<std::string(llvm::StringRef)> at,
                        llvm::StringRef row) {
    const std::string atR = at("r");
    if (atR.find("__expf(") == std::string::npos &&
        atR.find(" * ") == std::string::npos)
      return at(row);
    auto slot = llvm::find(factorTables, atR);
    if (slot == factorTables.end())
      slot = factorTables.insert(slot, atR);
    return llvm::formatv("ftab{0}[{1}]", slot - factorTables.begin(), row);
  }
  /// The tabulated row factors into this warp's tables after the columns'
  /// (they read the columns' tables), at `indent`.
  void printFactorTables(llvm::StringRef indent) {
    if (factorTables.empty())
      return;
    os << indent << "// Row factors, once a row into this warp's tables.\n";
    for (auto [index, atR] : llvm::enumerate(factorTables)) {
      const int64_t slot = int64_t(tables.size() + index) * 64;
      os << llvm::formatv("{0}wg_column_rows(n, [&](int r) {{ return {1}; "
                          "}).store(mine + {2});\n"
                          "{0}const float *ftab{3} = mine + {2};\n",
                          indent, atR, slot, index);
    }
    os << indent << "__syncwarp();\n";
  }

  /// The computed gates' constants a value head: exp(A_log) and a gate a
  /// token's bias; with `perChannel` also the bias of a key channel's gate.
  void printGateConstants(bool perChannel) {
    os << "  const float gate_a = expf(p.gate_a_log[hv]);\n"
          "  const float gate_bias = p.gate_dt_bias ? p.gate_dt_bias[hv] : "
          "0.0f;\n";
    if (perChannel)
      os << "  (void)gate_bias;\n"
            "  auto gate_bias_at = [&](int c) {\n"
            "    return p.gate_dt_bias ? p.gate_dt_bias[hv * K + c] : 0.0f;\n"
            "  };\n"
            "  (void)gate_bias_at;\n";
  }

  /// A prepare kernel's chunk (a CTA a chunk and value head): its value
  /// head, sequence and key head, the chunk's first token t0 and length n;
  /// the CTA leaves where the chunk starts past its sequence's end.
  void printPrepareChunk() {
    os << llvm::formatv("  const int hv = blockIdx.x % {0};\n"
                        "  const i64 seq = blockIdx.x / {0}, chunk = "
                        "blockIdx.y;\n"
                        "  const int kh = hv / ({0} / {1});\n"
                        "  i64 begin, end;\n"
                        "  sequence_bounds(p, seq, begin, end);\n"
                        "  const i64 t0 = begin + chunk * C;\n"
                        "  if (t0 >= end)\n"
                        "    return;\n"
                        "  const int n = (int)min((i64)C, end - t0);\n",
                        spec.valueHeads, spec.heads);
  }

  /// A kernel's end: what another arch's compile says, and its entry.
  void printKernelEnd(const std::string &name) {
    os << "#else\n"
          "  static_assert(false, \"lina: this kernel uses wgmma, which "
          "needs sm_90a (a Hopper GPU); compile for sm_90a or plan it "
          "with --mma warp\");\n"
          "#endif\n"
          "}\n"
       << "LINA_KERNEL_ENTRY(" << name << ")\n";
  }

  /// Each column's value, a warp's copy, the tabulated ones in this warp's
  /// tables (`mine`) and the last rows read (`last`), at `indent`.
  void printColumns(llvm::StringRef indent) {
    for (auto [index, column] : llvm::enumerate(scan.columns))
      if (preparing || scanComputes.count(column))
        os << llvm::formatv("{0}const wg_column c{1} = {2};\n", indent, index,
                            columnExpression(column));
    for (auto [slot, index] : llvm::enumerate(tables))
      os << llvm::formatv("{0}c{1}.store(mine + {2});\n"
                          "{0}const float *tab{1} = mine + {2};\n",
                          indent, index, slot * 64);
    os << indent << "__syncwarp();\n";
    for (int64_t index : lasts)
      os << llvm::formatv("{0}const float last{1} = c{1}.at(n - 1);\n", indent,
                          index);
  }
};

std::string Printer::columnExpression(Operation *column) {
  auto of = [&](Value v) {
    if (recorded(v.getDefiningOp()))
      return "wg_column_of(" + recordRows(v.getDefiningOp()) + ")";
    return llvm::formatv("c{0}", columnIndex.lookup(v)).str();
  };
  auto map = [&](Value v, const std::string &body) {
    return llvm::formatv("wg_column_map({0}, n, [&](float x) {{ return {1}; "
                         "})",
                         of(v), body)
        .str();
  };
  return llvm::TypeSwitch<Operation *, std::string>(column)
      .Case([&](LoadOp load) -> std::string {
        if (!perTokenInput(column))
          return "wg_column_fill(p.g[hv], n)";
        if (preparing)
          return llvm::formatv("wg_column_load({0} + t0 * {1} + hv, {1}, n)",
                               load.getOperand() == ir::Operand::beta ? "p.beta"
                                                                      : "p.g",
                               spec.valueHeads);
        return llvm::formatv("wg_column_of(raw + (stage * {0} + {1}) * 64)",
                             raw.size(), raw.lookup(column));
      })
      .Case([&](CumsumOp o) {
        return llvm::formatv("{0}.cumsum(n, {1})", of(o.getInput()),
                             o.getExclusive() ? "true" : "false")
            .str();
      })
      .Case([&](BetaOp o) {
        double f = o.getSource() == ir::BetaSource::two_sigmoid ? 2.0 : 1.0;
        return map(o.getInput(), floatLiteral(f) + " * sigmoid(x)");
      })
      .Case([&](GateOp o) {
        if (o.getSource() == ir::GateSource::softplus)
          return map(o.getInput(), "-gate_a * softplus(x + gate_bias)");
        return map(o.getInput(),
                   floatLiteral(o.getLowerBound()->convertToDouble()) +
                       " * sigmoid(gate_a * (x + gate_bias))");
      })
      .Case([&](ScaleOp o) {
        return map(o.getInput(),
                   "x * " + floatLiteral(o.getFactor().convertToDouble()));
      })
      .Case([&](NegOp o) { return map(o.getInput(), "-x"); })
      .Default(
          [](Operation *) { return std::string("wg_column{0.0f, 0.0f}"); });
}

int64_t Printer::print(const std::string &name, bool segments) {
  // The CTA's VT value columns of the head's V, a warpgroup each 64, and
  // the scores' warpgroup after them where they run apart.
  const bool apart = scan.scoresApart;
  const int64_t H = spec.heads, HV = spec.valueHeads, K = spec.keyDim,
                V = spec.valueDim, VT = tileV, W = VT / 64;
  if (threads != 128 * (W + (apart ? 1 : 0))) {
    error = llvm::formatv("warpgroup scan: {0} threads for {1} value columns "
                          "{2}the scores apart",
                          threads, VT, apart ? "with " : "without ");
    return -1;
  }
  if (segments && VT != V) {
    error = llvm::formatv("segments: the warpgroup scan runs in segments "
                          "only on whole heads (tile-v {0}, got {1})",
                          V, VT);
    return -1;
  }
  // The factors first: they decide which columns the chunk tabulates.
  DecayProductOp scores = scan.scores;
  std::string mask = scores.getMask() == ir::Mask::strict ? "u < t" : "u <= t";
  std::string scoresFactor =
      product({factor(scan.scoresLhs, "t"), factor(scan.scoresRhs, "u"),
               factor(scan.intraRhs, "u"),
               isZero(scores.getLhsGates()) && isZero(scores.getRhsGates())
                   ? "1.0f"
                   : "__expf(" + table(scores.getLhsGates(), "t") + " - " +
                         table(scores.getRhsGates(), "u") + ")"});
  // A row factor of `rows` at a given row, for tabulated.
  auto rowsAt = [&](ScaledRows &rows) {
    return [&](llvm::StringRef r) { return factor(rows, r); };
  };
  std::string outputFactor = tabulated(rowsAt(scan.stateLhs), "t");
  // X's rows in a segment record: the same factors at row r.
  std::string segmentRowFactor =
      segments ? tabulated(rowsAt(scan.stateLhs), "r") : "";
  std::string keysFactor = tabulated(
      [&](llvm::StringRef r) {
        return product({factor(scan.updateLhs, r), factor(scan.updateRhs, r)});
      },
      "r");
  std::string decayFactor =
      scan.decay && !isZero(scan.decay.getLogGates())
          ? "__expf(" + last(scan.decay.getLogGates()) + ")"
          : "";
  if (segments && decayFactor.empty()) {
    error = "segments: the warpgroup scan runs in segments only with a "
            "decay (the chunk has none)";
    return -1;
  }
  // The delta rule: the residual's factors on v's rows (X) and on Y S's
  // token columns (Y's rows), and the prepared solve a chunk.
  const bool delta = static_cast<bool>(scan.solve);
  if (delta && segments) {
    error = "segments: the delta rule's warpgroup scan runs whole sequences";
    return -1;
  }
  std::string valuesFactor =
      delta ? tabulated(rowsAt(scan.residualValues), "t") : std::string();
  std::string keysResidualFactor =
      delta ? tabulated(rowsAt(scan.residualKeys), "t") : std::string();
  const int64_t tableFloats =
      std::max<int64_t>(1, tables.size() + factorTables.size()) * 64;
  const int64_t rawColumns = raw.size();
  // Each per-token input is copied by 64 threads of its own, of the
  // state's warpgroups (which fetch the stages).
  if (rawColumns * 64 > 128 * W) {
    error = llvm::formatv("warpgroup scan: {0} per-token inputs need {1} "
                          "threads to copy, more than the {2} of the CTA's "
                          "state warpgroups",
                          rawColumns, rawColumns * 64, 128 * W);
    return -1;
  }
  const bool gates = llvm::any_of(scan.columns, [&](Operation *c) {
    return isa<GateOp>(c) && scanComputes.count(c);
  });
  const int64_t recordSlots = static_cast<int64_t>(record.size());

  os << llvm::formatv(
      "extern \"C\" __global__ void __launch_bounds__({0}, 1) {1}(lina::Params "
      "p, const __grid_constant__ lina::wg_maps maps) {{\n",
      threads, name);
  os << llvm::formatv(
      "#if defined(__CUDA_ARCH_FEAT_SM90_ALL)\n"
      "  using namespace lina;\n"
      "  // Key and value dims, the CTA's value columns (a tile of V) and\n"
      "  // its warpgroups (64 value columns each).\n"
      "  constexpr int K = {0}, V = {1}, VT = {6}, W = {2}, C = 64;\n"
      "{5}"
      "  // A stage: q, k, v's tile{3}; its bytes that land, and\n"
      "  // its stride (1024-aligned for the swizzled boxes).\n"
      "  constexpr int kKeyTile = C * K * 2, kStageBytes = 2 * kKeyTile + C * "
      "VT * 2{4};\n"
      "  constexpr int kStage = (kStageBytes + 1023) / 1024 * 1024;\n",
      K, V, W,
      delta ? " and the chunk's record: its prepared solve T (8 KB) and "
              "values"
            : "",
      delta ? " + kRecordBytes" : "",
      delta ? llvm::formatv("  constexpr int kSolveBytes = C * C * 2, "
                            "kRecordBytes = kSolveBytes + {0} * 64 * 4;\n",
                            recordSlots)
                  .str()
            : "",
      VT);
  os << "  LINA_DYNAMIC_SHARED_ALIGNED(unsigned char, wg_dynamic, 1024);\n"
        "  // Swizzled boxes start 1024-aligned (the host asks for 1024 bytes "
        "more).\n"
        "  unsigned char *wg_smem =\n"
        "      wg_dynamic + ((1024 - (shared_address(wg_dynamic) & 1023)) & "
        "1023);\n"
        "  // Two stages of q, k, v; K~; P; the warpgroups' output staging;\n"
        "  // each warp's column tables; the rows' norms; two stages' raw\n"
        "  // columns; the stages' barriers.\n"
        "  unsigned char *stages = wg_smem;\n"
        "  unsigned char *ktilde = wg_smem + 2 * kStage;\n"
        "  unsigned char *ptile = ktilde + kKeyTile;\n"
        "  mma_t *staging = (mma_t *)(ptile + C * C * 2);\n"
        "  float *tables = (float *)(staging + W * C * 72);\n";
  os << llvm::formatv("  float *norms = tables + {3} * {0};\n"
                      "  float *raw = norms + {2} * 64;\n"
                      "  u64 *landed = (u64 *)(raw + 2 * {1} * 64);\n"
                      "  (void)norms;\n",
                      tableFloats, rawColumns, norms.size(), threads / 32);
  os << llvm::formatv(
      "  (void)raw;\n"
      "  // The CTA's value tile, value head and sequence; its\n"
      "  // warpgroups hold the head's value columns from v0.\n"
      "  const int vtile = blockIdx.x % (V / VT);\n"
      "  const int hv = blockIdx.x / (V / VT) % {0};\n"
      "  const i64 seq = blockIdx.x / (V / VT) / {0};\n"
      "  const int v0 = VT * vtile;\n"
      "  const int kh = hv / ({0} / {1});\n"
      "  i64 begin, end;\n"
      "  sequence_bounds(p, seq, begin, end);\n"
      "  const int tid = threadIdx.x, wg = tid / 128;\n"
      "  float *mine = tables + tid / 32 * {2};\n"
      "  (void)mine;\n"
      "  mma_t *o = (mma_t *)p.o;\n"
      "  const bool out_words = aligned16(o);\n",
      HV, H, tableFloats);
  if (gates)
    printGateConstants(false);
  os << "  wg_init_barriers(landed);\n"
        "  auto fetch = [&](i64 t0, int stage) {\n"
        "    const int n = (int)min((i64)C, end - t0);\n"
        "    (void)n;\n"
        "    unsigned char *at = stages + stage * kStage;\n"
        "    if (tid == 0) {\n"
        "      // The stage's last readers passed the loop top's barrier; "
        "their\n"
        "      // generic writes go before the async proxy's.\n"
        "      async_proxy_fence();\n"
        "      mbar_expect_bytes(&landed[stage], kStageBytes);\n"
        "      wg_fetch_qkv<K, VT>(at, maps, kh, hv, (int)t0, "
        "&landed[stage], v0);\n";
  if (delta)
    os << llvm::formatv(
        "      bulk_copy(at + 2 * kKeyTile + C * VT * 2, p.chunk_data + "
        "(chunk_slot(begin, seq, (t0 - begin) / C, C) * {0} + hv) * "
        "(i64)({1}), "
        "kRecordBytes, &landed[stage]);\n",
        HV, warpgroupSolveRecordFloats(recordSlots));
  os << "    }\n";
  for (Operation *column : scan.columns) {
    auto it = raw.find(column);
    if (it == raw.end())
      continue;
    const char *input = cast<LoadOp>(column).getOperand() == ir::Operand::beta
                            ? "p.beta"
                            : "p.g";
    os << llvm::formatv(
        "    if (tid >= {0} && tid < {0} + C) {{\n"
        "      const int r = tid - {0};\n"
        "      copy_async<4>(raw + (stage * {1} + {2}) * 64 + r, {3} + (t0 + "
        "(r < n ? r : 0)) * {4} + hv, r < n ? 4 : 0);\n"
        "    }\n",
        64 * it->second, rawColumns, it->second, input, HV);
  }
  os << "    copies_issued();\n"
        "  };\n";
  // The rows' norms, a table each, into `norms`: by the CTA, or apart by
  // the scores' warpgroup alone.
  auto printNorms = [&](llvm::StringRef indent) {
    os << indent
       << "// The rows' norms of the tiles normalised in the kernel.\n";
    for (auto [slot, norm] : llvm::enumerate(norms))
      os << llvm::formatv(
          "{3}wg_row_norms<K{2}>(norms + {0} * 64, {1});\n", slot,
          cast<LoadOp>(norm->getOperand(0).getDefiningOp()).getOperand() ==
                  ir::Operand::q
              ? "qt"
              : "kt",
          apart ? ", 128" : "", indent);
  };
  // The chunk's prepared values and per-token tables, which each warp
  // reads from its own tables.
  auto printChunkTables = [&](llvm::StringRef indent) {
    if (recordSlots > 0) {
      os << indent
         << "// The chunk's prepared values, after T in its record.\n";
      for (auto [slot, value] : recordBySlot())
        os << llvm::formatv("{2}const float *{0} = (const float *)(vt + C * "
                            "VT * 2 + kSolveBytes) + {1} * 64;\n",
                            recordRows(value), slot, indent);
    }
    os << indent << "// The per-token columns, a copy a warp.\n";
    printColumns(indent);
    printFactorTables(indent);
  };
  if (apart)
    os << llvm::formatv(
        "  // The scores on a warpgroup of their own (the last), beside the\n"
        "  // state's chain on the first; named barriers between them, each a\n"
        "  // signal one arrives at and the other waits at. The first signals\n"
        "  // kChunkLanded once a chunk's stage is ready (its raw columns\n"
        "  // copied, k's rows past n zero), which also says it is done with\n"
        "  // the chunk before (its norms and P); this one signals\n"
        "  // kScalesReady (the rows' norms) and kPReady (P, and done reading\n"
        "  // the stage, which the first refills at the next chunk).\n"
        "  // kStateGroup and kScoresGroup are each warpgroup's own; 1 is\n"
        "  // wg_store_output's.\n"
        "  constexpr int kChunkLanded = 3, kScalesReady = 4, kPReady = 5, "
        "kStateGroup = 6, kScoresGroup = 7;\n"
        "  if (wg == W) {{\n"
        "    int stage = 0;\n"
        "    unsigned parity = 0;\n"
        "    for (i64 t0 = begin; t0 < end; t0 += C, stage ^= 1, parity ^= "
        "stage ^ 1) {{\n"
        "      const int n = (int)min((i64)C, end - t0);\n"
        "      mbar_wait(&landed[stage], parity);\n"
        "      cta_sync_at<kChunkLanded>();\n"
        "      unsigned char *qt = stages + stage * kStage, *kt = qt + "
        "kKeyTile, *vt = kt + kKeyTile;\n"
        "      (void)vt;\n"
        "      float pacc[32];\n"
        "      wg_fence();\n"
        "      wg_issue_scores<K, 1>(pacc, qt, kt, 0);\n");
  // The scores' warpgroup's chunk, inside its loop.
  if (apart) {
    if (!norms.empty()) {
      printNorms("      ");
      os << "      cta_sync_at<kScoresGroup, 128>();\n";
    }
    os << "      cta_arrive_at<kScalesReady>();\n";
    printChunkTables("      ");
    os << llvm::formatv(
        "      // P with its mask and factors, once its product has landed.\n"
        "      wg_wait<0>();\n"
        "      wg_store_scores<1>(ptile, pacc, 0, n, [&](int t, int u) {{\n"
        "        return wg_kept({0}, {1});\n"
        "      });\n"
        "      async_proxy_fence();\n"
        "      cta_arrive_at<kPReady>();\n"
        "    }\n"
        "    return;\n"
        "  }\n",
        mask, scoresFactor);
  }
  os << "  // S^T as the update's m64nK accumulators "
        "(wg_each_state_element).\n"
        "  float s[K / 2];\n";
  os << llvm::formatv(
      "  wg_load_state<K, V>(s, p, seq, hv, {0}, W * vtile + wg);\n", HV);
  os << "  if (begin < end)\n"
        "    fetch(begin, 0);\n"
        "  int stage = 0;\n"
        "  unsigned parity = 0; // of the stage's barrier: flips every "
        "second chunk\n"
        "  for (i64 t0 = begin; t0 < end; t0 += C, stage ^= 1, parity ^= "
        "stage ^ 1) {\n"
        "    const int n = (int)min((i64)C, end - t0);\n"
        "    copies_landed<0>();\n"
        "    mbar_wait(&landed[stage], parity);\n";
  if (apart)
    os << "    unsigned char *qt = stages + stage * kStage, *kt = qt + "
          "kKeyTile, *vt = kt + kKeyTile;\n"
          "    // k's rows past n, the update's operand, to zero before the\n"
          "    // scores' warpgroup reads the stage.\n"
          "    wg_zero_rows_past<K, 128>(kt, n);\n"
          "    async_proxy_fence();\n"
          "    cta_sync_at<kStateGroup, 128>();\n"
          "    cta_arrive_at<kChunkLanded>();\n"
          "    // The products of the landed tiles first: the state's.\n"
          "    float oacc[32];\n";
  else
    os << "    __syncthreads();\n"
          "    unsigned char *qt = stages + stage * kStage, *kt = qt + "
          "kKeyTile, *vt = kt + kKeyTile;\n"
          "    // The products of the landed tiles first: the scores and the "
          "state's.\n"
          "    float pacc[32 / W], oacc[32];\n";
  os << "    unsigned a[K / 16][4];\n"
        "    wg_pack_state<K>(a, s);\n"
        "    wg_fence();\n";
  // In their commit groups' order (lina-warpgroup-groups'); they land in
  // that order, and each wait below counts from it.
  std::vector<std::pair<int64_t, std::string>> top = {
      {groups.lookup(scan.stateProduct),
       "    wg_issue_state_product<K>(oacc, a, qt);\n"}};
  if (!apart)
    top.push_back({groups.lookup(scan.scores),
                   "    wg_issue_scores<K, W>(pacc, qt, kt, wg);\n"});
  if (delta) {
    os << "    // S^T Y^T (Y k's rows), the residual's.\n"
          "    float yacc[32];\n";
    top.push_back({groups.lookup(scan.residualProduct),
                   "    wg_issue_state_product<K>(yacc, a, kt);\n"});
  }
  llvm::sort(top);
  for (auto &[group, issue] : top)
    os << issue;
  const int64_t topGroups = static_cast<int64_t>(top.size());
  os << "    // The next chunk's copies while they run.\n"
        "    if (t0 + C < end)\n"
        "      fetch(t0 + C, stage ^ 1);\n";
  if (apart) {
    os << "    // The rows' norms from the scores' warpgroup.\n"
          "    cta_sync_at<kScalesReady>();\n";
  } else if (!norms.empty()) {
    printNorms("    ");
    os << "    __syncthreads();\n";
  }
  printChunkTables("    ");
  if (segments)
    os << llvm::formatv(
        "    // The chunk's segment record: X and the state's decay.\n"
        "    {{\n"
        "      float *rec = p.chunk_data + (chunk_slot(begin, seq, (t0 - "
        "begin) / C, C) * {0} + hv) * (i64){3};\n"
        "      wg_store_rows<K>(rec, qt, n, [&](int r) {{ return {1}; });\n"
        "      if (tid == 0)\n"
        "        rec[C * K / 2] = {2};\n"
        "    }\n",
        HV, segmentRowFactor, decayFactor, wgmmaSegmentRecordFloats(K));
  // The state's decay while the landed tiles' products run: they read
  // its packed copy, and only the update, the chunk's last product, adds
  // into it, so the multiplies stay off the chain from the intra-chunk
  // product to the update.
  if (!decayFactor.empty())
    os << llvm::formatv("    // The state's decay; the products in flight "
                        "read its packed copy.\n"
                        "    {{\n"
                        "      const float f = {0};\n"
                        "#pragma unroll\n"
                        "      for (int i = 0; i < K / 2; ++i)\n"
                        "        s[i] *= f;\n"
                        "    }\n",
                        decayFactor);
  if (!delta) {
    os << llvm::formatv(
        "    // K~: the update's row factors on k's tile.\n"
        "    wg_scale_rows<K>(ktilde, kt, n, [&](int r) {{ return {0}; });\n"
        "    wg_zero_rows_past<VT>(vt, n);\n"
        "    // P: the scores' mask and factors, as mma_t.\n"
        "{4}"
        "    wg_store_scores<W>(ptile, pacc, wg, n, [&](int t, int u) {{\n"
        "      return wg_kept({1}, {2});\n"
        "    });\n"
        "    // X S's row factors on its token columns.\n"
        "{5}"
        "    wg_scale_columns(oacc, [&](int t) {{ return {3}; });\n"
        "    async_proxy_fence();\n"
        "    __syncthreads();\n"
        "    wg_issue_intra(oacc, vt, ptile, wg);\n"
        "    wg_issue_update<K>(s, vt, ktilde, wg);\n",
        keysFactor, mask, scoresFactor, outputFactor,
        waitFor({scan.scores}, topGroups),
        waitFor({scan.stateProduct}, topGroups));
  } else {
    os << llvm::formatv(
        "    // The residual R^T = V^T diag(x) - S^T Y^T diag(y) once its\n"
        "    // product has landed, and the values U^T = R^T T^T with the\n"
        "    // chunk's prepared solve.\n"
        "{2}"
        "    float racc[32], uacc[32];\n"
        "    wg_residual(racc, yacc, vt, wg, n, [&](int t) {{ return {0}; "
        "}, [&](int t) {{ return {1}; });\n"
        "    unsigned rf[4][4];\n"
        "    wg_pack_columns(rf, racc, [](int) {{ return 1.0f; });\n"
        "    wg_issue_solve(uacc, rf, vt + C * VT * 2);\n",
        valuesFactor, keysResidualFactor,
        waitFor({scan.residualProduct}, topGroups));
    if (apart)
      os << llvm::formatv(
          "    // While it runs: X S's row factors on its token columns.\n"
          "{1}"
          "    wg_scale_columns(oacc, [&](int t) {{ return {0}; });\n",
          outputFactor, waitFor({scan.stateProduct}, topGroups + 1));
    else
      os << llvm::formatv(
          "    // While it runs: P with its mask and factors, X S's row "
          "factors\n"
          "    // on its token columns.\n"
          "{3}"
          "    wg_store_scores<W>(ptile, pacc, wg, n, [&](int t, int u) {{\n"
          "      return wg_kept({0}, {1});\n"
          "    });\n"
          "    wg_scale_columns(oacc, [&](int t) {{ return {2}; });\n"
          "    // k's rows past n, the update's operand, to zero.\n"
          "    wg_zero_rows_past<K>(kt, n);\n"
          "    async_proxy_fence();\n"
          "    __syncthreads();\n",
          mask, scoresFactor, outputFactor,
          // P and X S, after the solve's group was issued.
          waitFor({scan.scores, scan.stateProduct}, topGroups + 1));
    os << llvm::formatv(
        "{1}"
        "    // U^T for the output, and with the update's factors on its "
        "tokens.\n"
        "    unsigned uf[4][4], ukf[4][4];\n"
        "    wg_pack_columns(uf, uacc, [](int) {{ return 1.0f; });\n"
        "    wg_pack_columns(ukf, uacc, [&](int r) {{ return {0}; });\n"
        "{2}"
        "    wg_issue_values_intra(oacc, uf, ptile);\n"
        "    wg_issue_values_update<K>(s, ukf, kt);\n",
        keysFactor, waitFor({scan.solve}, topGroups + 1),
        apart ? "    // P from the scores' warpgroup.\n"
                "    cta_sync_at<kPReady>();\n"
              : "");
  }
  // The intra-chunk product and the update, the chunk's last groups.
  const int64_t issued = topGroups + (delta ? 1 : 0) + 2;
  os << llvm::formatv(
      "{1}"
      "    wg_store_output<{0}, V>(oacc, staging, o, t0, n, hv, W * vtile + "
      "wg, "
      "out_words);\n"
      "{2}"
      "  }\n"
      "  wg_store_state<K, V>(s, p, seq, hv, {0}, W * vtile + wg);\n",
      HV, waitFor({scan.intra}, issued), waitFor({scan.update}, issued));
  printKernelEnd(name);
  // The layout above, and 1024 bytes to align the swizzled tiles.
  const int64_t keyTile = kChunk * K * 2,
                stage = llvm::alignTo(
                    2 * keyTile + kChunk * VT * 2 +
                        (delta ? warpgroupSolveRecordFloats(recordSlots) * 4
                               : 0),
                    1024);
  return 2 * stage + keyTile + kChunk * kChunk * 2 + W * kChunk * 72 * 2 +
         threads / 32 * tableFloats * 4 + int64_t(norms.size()) * 64 * 4 +
         2 * rawColumns * 64 * 4 + 2 * 8 + 1024;
}

int64_t Printer::printPrepare(const std::string &name) {
  preparing = true;
  // As many warpgroups as the scan's CTA: the plan launches both kernels
  // with its threads.
  const int64_t H = spec.heads, HV = spec.valueHeads, K = spec.keyDim,
                W = threads / 128;
  // A[t][u] = w_t (ka_t . kb_u) exp(Ga_t - Gb_u) for u < t, its factors
  // first: they decide the columns tabulated.
  DecayProductOp scores = scan.solveScores;
  // The norms the record carries, whether or not A reads them.
  for (auto [slot, value] : recordBySlot())
    if (auto norm = dyn_cast<L2NormOp>(value))
      normSlot(norm);
  const int64_t recordFloats =
      warpgroupSolveRecordFloats(static_cast<int64_t>(record.size()));
  llvm::SmallVector<std::string, 6> terms;
  for (Value weights : scan.solveRowWeights)
    terms.push_back(table(weights, "t"));
  terms.push_back(factor(scan.solveLhs, "t"));
  terms.push_back(factor(scan.solveRhs, "u"));
  if (!isZero(scores.getLhsGates()) || !isZero(scores.getRhsGates()))
    terms.push_back("__expf(" + table(scores.getLhsGates(), "t") + " - " +
                    table(scores.getRhsGates(), "u") + ")");
  std::string matrixFactor = product(terms);
  // The record's chains of k's row factors, each its product at row tid
  // (before the columns are printed: they decide which are tabulated).
  llvm::DenseMap<Operation *, std::string> chains;
  for (const ScaledRows *rows : keyRowsOfProducts(scan))
    if (!rows->factors.empty() && record.count(rows->factors.front()) &&
        !isa<L2NormOp>(rows->factors.front()))
      chains[rows->factors.front()] = factor(*rows, "tid");
  const int64_t tableFloats = std::max<int64_t>(1, tables.size()) * 64;
  const bool gates =
      llvm::any_of(scan.columns, [](Operation *c) { return isa<GateOp>(c); });
  os << llvm::formatv(
      "extern \"C\" __global__ void __launch_bounds__({0}) {1}(lina::Params "
      "p) {{\n"
      "#if defined(__CUDA_ARCH_FEAT_SM90_ALL)\n"
      "  using namespace lina;\n"
      "  constexpr int K = {2}, W = {3}, C = 64, kKeyTile = C * K * 2;\n"
      "  LINA_DYNAMIC_SHARED_ALIGNED(unsigned char, wg_dynamic, 1024);\n"
      "  unsigned char *wg_smem =\n"
      "      wg_dynamic + ((1024 - (shared_address(wg_dynamic) & 1023)) & "
      "1023);\n"
      "  // k's tile; A and T (fp32, rows of kWgSolveLd); each warp's column "
      "tables;\n"
      "  // the rows' norms.\n"
      "  unsigned char *kt = wg_smem;\n"
      "  float *a = (float *)(kt + kKeyTile), *t = a + 64 * kWgSolveLd;\n"
      "  float *tables = t + 64 * kWgSolveLd, *norms = tables + 4 * W * {4};\n"
      "  (void)norms;\n",
      threads, name, K, W, tableFloats);
  printPrepareChunk();
  os << llvm::formatv("  const int tid = threadIdx.x, wg = tid / 128;\n"
                      "  float *mine = tables + tid / 32 * {0};\n"
                      "  (void)mine;\n",
                      tableFloats);
  if (gates)
    printGateConstants(false);
  os << llvm::formatv(
      "  // k's rows, zero past n, for A = k k^T on the warpgroups.\n"
      "  wg_load_rows<K>(kt, (const mma_t *)p.k + (t0 * {0} + kh) * K, "
      "(i64){0} * K, n);\n"
      "  async_proxy_fence();\n"
      "  __syncthreads();\n"
      "  float acc[32 / W];\n"
      "  wg_fence();\n"
      "  wg_issue_scores<K, W>(acc, kt, kt, wg);\n",
      H);
  if (!norms.empty()) {
    for (auto [slot, norm] : llvm::enumerate(norms))
      os << llvm::formatv("  wg_row_norms<K>(norms + {0} * 64, kt);\n", slot);
    os << "  __syncthreads();\n";
  }
  printColumns("  ");
  os << llvm::formatv("  float *record = p.chunk_data + (chunk_slot(begin, "
                      "seq, chunk, C) * {0} + hv) * (i64)({1});\n",
                      HV, recordFloats);
  if (!record.empty()) {
    os << "  // The values the scan reads, after T: warp 0's copy of each "
          "column,\n  // the rows' norms, the products of k's row factors.\n";
    for (auto [slot, value] : recordBySlot()) {
      if (auto norm = dyn_cast<L2NormOp>(value))
        os << llvm::formatv("  if (tid < 64)\n"
                            "    record[{0} + {1} * 64 + tid] = norms[{2} * 64 "
                            "+ tid];\n",
                            kSolveRecordFloats, slot, normSlot(norm));
      else if (chains.count(value))
        os << llvm::formatv("  if (tid < 64)\n"
                            "    record[{0} + {1} * 64 + tid] = tid < n ? {2} "
                            ": 0.0f;\n",
                            kSolveRecordFloats, slot, chains.lookup(value));
      else
        os << llvm::formatv("  if (tid < 32)\n"
                            "    c{0}.store(record + {1} + {2} * 64);\n",
                            columnIndex.lookup(value->getResult(0)),
                            kSolveRecordFloats, slot);
    }
  }
  os << llvm::formatv(
      "  // A, strictly lower, then T = (I + A)^-1 into the chunk's record.\n"
      "  wg_wait<0>();\n"
      "  wg_store_matrix<W>(a, acc, wg, n, [&](int t, int u) {{\n"
      "    return wg_kept(u < t, {0});\n"
      "  });\n"
      "  __syncthreads();\n"
      "  // k's tile, read by now, holds the solve's partial products.\n"
      "  wg_unit_lower_inverse(a, t, (float *)kt, [] {{});\n"
      "  wg_store_box((unsigned char *)record, t);\n",
      matrixFactor);
  printKernelEnd(name);
  return kChunk * K * 2 + 2 * 64 * kSolveLd * 4 + 4 * W * tableFloats * 4 +
         int64_t(norms.size()) * 64 * 4 + 1024;
}

int64_t Printer::printChannelPrepare(const std::string &name) {
  preparing = true;
  formedRight.clear();
  const int64_t H = spec.heads, HV = spec.valueHeads, K = spec.keyDim,
                W = threads / 128;
  const bool lowRank = scan.lowRank();
  const int64_t tiles = lowRank ? 4 : 2;
  const std::string smem =
      lowRank ? "wg_channel_smem<K, 4>" : "wg_channel_smem<K>";
  ChannelRecord layout = warpgroupChannelRecord(record, K);
  Operation *xOp = chainOp(scan.stateLhs), *kOp = chainOp(scan.updateLhs);
  // The factors first: they decide the columns tabulated. K~ carries the
  // update's value factors too, P the intra-chunk product's.
  ChannelExponents xe, ke;
  const std::string xFactor = channelFactor(scan.stateLhs, "r", xe);
  const std::string kFactor = product(
      {channelFactor(scan.updateLhs, "r", ke), factor(scan.updateRhs, "r")});
  const std::string scoresFactor =
      product({factor(scan.scoresLhs, "t"), factor(scan.scoresRhs, "u"),
               factor(scan.intraRhs, "u")});
  // The delta rule's and DPLR's: Y of Y S, A's factors (its row weights,
  // its operands' row factors, its sign) and the residual's factor of v's
  // rows.
  const bool delta = static_cast<bool>(scan.solve);
  ChannelExponents ye;
  std::string yFactor, matrixFactor, valuesFactor;
  if (delta) {
    yFactor = channelFactor(scan.residualKeys, "r", ye);
    llvm::SmallVector<std::string, 4> terms;
    for (Value weights : scan.solveRowWeights)
      terms.push_back(table(weights, "t"));
    terms.push_back(factor(scan.solveLhs, "t"));
    terms.push_back(factor(scan.solveRhs, "u"));
    if (scan.solveNegated)
      terms.push_back("-1.0f");
    matrixFactor = product(terms);
    if (!scan.residualValues.factors.empty())
      valuesFactor = factor(scan.residualValues, "tid");
  }
  // DPLR's v terms: K~ of K~^T V, L of L V and P of P V.
  ChannelExponents de;
  std::string directKFactor, residualScoresFactor, directScoresFactor;
  if (lowRank) {
    directKFactor = product({channelFactor(scan.directUpdateLhs, "r", de),
                             factor(scan.directUpdateRhs, "r")});
    residualScoresFactor = product({factor(scan.residualScoresLhs, "t"),
                                    factor(scan.residualScoresRhs, "u"),
                                    factor(scan.residualIntraRhs, "u")});
    directScoresFactor = product({factor(scan.directScoresLhs, "t"),
                                  factor(scan.directScoresRhs, "u"),
                                  factor(scan.directIntraRhs, "u")});
  }
  // The gate a token and key channel that G sums: a per-channel gate's
  // elementwise ops of g, or a token's gate (a column's table) broadcast
  // over the channels, or none.
  std::string pre = "0.0f";
  bool exclusive = false, gateInput = false;
  if (auto sums = scan.channelSums.getDefiningOp<CumsumOp>()) {
    exclusive = sums.getExclusive();
    gateInput = colsOf(sums.getResult()) != 1;
    pre =
        gateInput ? channelInput(sums.getInput()) : table(sums.getInput(), "r");
  }
  const int64_t tableFloats = std::max<int64_t>(1, tables.size()) * 64;
  const bool gates =
      llvm::any_of(scan.columns, [](Operation *c) { return isa<GateOp>(c); }) ||
      llvm::any_of(scan.roles, [](auto entry) {
        return isa<GateOp>(entry.first) &&
               entry.second == WarpgroupRole::Channel;
      });
  // A (64 x 64 fp32) in q's d128 tile, each block row in q's rows once the
  // rows and P have read them (A's operands k's), in the tile's halves
  // (kWgHalvesLd): 17 KB less shared memory, which gives the kernel two
  // CTAs an SM at d128 (with one it took 2.2-3.4x the time of a
  // hand-written prepare kernel of two).
  const bool aInQTile = delta && !lowRank && K == 128 &&
                        scan.solveLhs.load != scan.q &&
                        scan.solveRhs.load != scan.q;
  const std::string aLd = aInQTile ? "32 in q's tile's halves" : "kWgSolveLd";
  const int64_t sharedBytes = channelSharedBytes(K, tiles) +
                              4 * W * tableFloats * 4 +
                              int64_t(norms.size()) * 64 * 4 +
                              (delta && !aInQTile ? kChunk * kSolveLd * 4 : 0);
  // ptxas fits the registers to the CTAs the shared memory allows (up to
  // two: with no minimum it aimed at more and spilled).
  const int64_t minCTAs = std::min<int64_t>(2, ctasBySharedMemory(sharedBytes));
  os << llvm::formatv(
      "extern \"C\" __global__ void __launch_bounds__({0}, {9}) "
      "{1}(lina::Params "
      "p) {{\n"
      "#if defined(__CUDA_ARCH_FEAT_SM90_ALL)\n"
      "  using namespace lina;\n"
      "  constexpr int K = {2}, W = {3}, C = 64;\n"
      "  LINA_DYNAMIC_SHARED_ALIGNED(unsigned char, wg_dynamic, 16);\n"
      "  // The fetched tiles, the gates, the scores' operands; each warp's\n"
      "  // column tables; the rows' norms; the solve's A (fp32, rows of\n"
      "  // {7}).\n"
      "  {6} &sm = *({6} *)wg_dynamic;\n"
      "  float *tables = (float *)(wg_dynamic + sizeof({6}));\n"
      "  float *norms = tables + 4 * W * {4};\n"
      "  float *a = {8};\n"
      "  (void)norms;\n"
      "  (void)a;\n",
      threads, name, K, W, tableFloats, norms.size(), smem, aLd,
      aInQTile ? "(float *)sm.tiles[0]"
               : llvm::formatv("norms + {0} * 64", norms.size()).str(),
      std::max<int64_t>(1, minCTAs));
  printPrepareChunk();
  os << llvm::formatv("  const int tid = threadIdx.x;\n"
                      "  float *mine = tables + tid / 32 * {0};\n"
                      "  (void)mine;\n",
                      tableFloats);
  if (gates)
    printGateConstants(true);
  // q's and k's tiles and the gates' inputs in flight together, the
  // columns' loads beside them: one round trip to memory, not one each.
  os << llvm::formatv(
      "  // The fetched rows and the gates' inputs, zero past n.\n"
      "  wg_copy_rows<K>(sm.tiles[0], (const mma_t *)p.q + (t0 * {0} + kh) * "
      "K, (i64){0} * K, n);\n"
      "  wg_copy_rows<K>(sm.tiles[1], (const mma_t *)p.k + (t0 * {0} + kh) * "
      "K, (i64){0} * K, n);\n"
      "  wg_channel_gates_copy<K>(sm, {1}, (i64){2} * K, n);\n"
      "  copies_issued();\n",
      H,
      gateInput ? llvm::formatv("p.g + (t0 * {0} + hv) * (i64)K", HV).str()
                : "nullptr",
      HV);
  printColumns("  ");
  // DPLR's a and b where they are inputs (beta_key's are k's rows).
  if (scan.a)
    os << llvm::formatv(
        "  wg_load_rows<K>(sm.tiles[2], (const mma_t *)p.a + (t0 * {0} + hv) "
        "* K, (i64){0} * K, n);\n",
        HV);
  if (scan.b)
    os << llvm::formatv(
        "  wg_load_rows<K>(sm.tiles[3], (const mma_t *)p.b + (t0 * {0} + hv) "
        "* K, (i64){0} * K, n);\n",
        HV);
  // P's image is zeroed before each box of scores (printScoresBox).
  os << "  copies_landed<0>();\n"
        "  __syncthreads();\n";
  for (auto [slot, norm] : llvm::enumerate(norms))
    os << llvm::formatv(
        "  wg_row_norms<K>(norms + {0} * 64, {1});\n", slot,
        rowsTile(cast<LoadOp>(norm->getOperand(0).getDefiningOp())));
  os << llvm::formatv(
      "  // G, the gates' running sum a key channel (log2 units), and the\n"
      "  // 16-row blocks' midpoints; the barrier also publishes the norms.\n"
      "  wg_channel_gates<K, {4}>(sm, n, {0}, [&](int r, int c, float x) {{ "
      "return {1}; });\n"
      "  unsigned char *record = (unsigned char *)(p.chunk_data + "
      "(chunk_slot(begin, seq, chunk, C) * {2} + hv) * (i64)({3}));\n",
      exclusive ? "true" : "false", pre, HV, layout.bytes / 4,
      gateInput ? "true" : "false");
  // Each chain of rows into the record at `op`'s offset, with its factor
  // and its per-channel decays' exponents, printed together as one pass
  // (wg_channel_rows_each) so that chains of one tile or the same decays
  // load and exponentiate once.
  llvm::SmallVector<std::string, 5> chains;
  auto channelRows = [&](const ChannelExponents &e, Operation *op, LoadOp load,
                         const std::string &f, llvm::StringRef what) {
    chains.push_back(llvm::formatv("      // {4}\n"
                                   "      wg_rows<{0}>(record + {1}, {2}, "
                                   "[&](int r) {{ return {3}; })",
                                   e.arguments(), layout.offsets.lookup(op),
                                   rowsTile(load), f, what)
                         .str());
  };
  channelRows(xe, xOp, scan.stateLhs.load, xFactor, "X of X S");
  channelRows(ke, kOp, scan.updateLhs.load, kFactor, "K~ of the update");
  if (scan.decay)
    os << llvm::formatv("  // The state's decay a key channel.\n"
                        "  wg_channel_decay<K>((float *)(record + {0}), sm, "
                        "n);\n",
                        layout.offsets.lookup(scan.decay));
  if (delta) {
    channelRows(ye, chainOp(scan.residualKeys), scan.residualKeys.load, yFactor,
                "Y of Y S");
    if (!valuesFactor.empty())
      os << llvm::formatv(
          "  // The residual's factor of v's rows, a row.\n"
          "  if (tid < 64)\n"
          "    ((float *)(record + {0}))[tid] = tid < n ? {1} : 0.0f;\n",
          layout.offsets.lookup(scan.residualValues.factors.front()),
          valuesFactor);
    if (lowRank)
      channelRows(de, chainOp(scan.directUpdateLhs), scan.directUpdateLhs.load,
                  directKFactor, "K~ of v's update");
  }
  os << "  // The record's rows with their factors and decays.\n"
        "  wg_channel_rows_each<K>(sm, n,\n"
     << llvm::join(chains, ",\n") << ");\n";
  // A, strictly lower, into the solve's matrix: in q's tile its block
  // rows take q's rows as P reads them for the last time.
  std::string aBox;
  if (delta)
    aBox = scoresBox(
        scan.solveScores, scan.solveLhs, matrixFactor,
        llvm::formatv("*(f32x2 *)(a + {0}) = f32x2{{x0, x1};",
                      aInQTile ? "wg_halves_at(t, u)" : "t * kWgSolveLd + u"));
  // Scores against the same right rows share its operand, its fragments
  // and the passes (wg_channel_scores' boxes), where two left operands fit
  // (twoLeftOperands): P and A; a DPLR chunk's L and P of v's products.
  const bool scoresTogether =
      delta && twoLeftOperands() && scan.solveRhs.load == scan.scoresRhs.load;
  const int64_t pOffset = layout.offsets.lookup(scan.scores);
  if (scoresTogether) {
    os << "  // P into the record and A, strictly lower, into the solve's: "
          "the scores\n  // with their factors and masks.\n";
    os << llvm::formatv("  wg_zero_box_above(record + {0});\n", pOffset);
    printScores(scan.scoresRhs, {scoresBox(scan.scores, scan.scoresLhs,
                                           scoresFactor, recordPut(pOffset)),
                                 aBox});
  } else {
    os << "  // P: the scores with their factors and mask, into the "
          "record.\n";
    printScoresBox(scan.scores, scan.scoresLhs, scan.scoresRhs, scoresFactor,
                   pOffset);
    if (delta) {
      os << "  // A, strictly lower: the scores of its operands with their "
            "factors.\n";
      printScores(scan.solveRhs, {aBox});
    }
  }
  if (lowRank) {
    const int64_t lOffset = layout.offsets.lookup(scan.residualScores),
                  vOffset = layout.offsets.lookup(scan.directScores);
    if (scan.residualScoresRhs.load == scan.directScoresRhs.load) {
      os << "  // L of the residual's L V and P of v's P V, together.\n";
      os << llvm::formatv("  wg_zero_box_above(record + {0});\n"
                          "  wg_zero_box_above(record + {1});\n",
                          lOffset, vOffset);
      printScores(scan.residualScoresRhs,
                  {scoresBox(scan.residualScores, scan.residualScoresLhs,
                             residualScoresFactor, recordPut(lOffset)),
                   scoresBox(scan.directScores, scan.directScoresLhs,
                             directScoresFactor, recordPut(vOffset))});
    } else {
      os << "  // L of the residual's L V, then P of v's P V.\n";
      printScoresBox(scan.residualScores, scan.residualScoresLhs,
                     scan.residualScoresRhs, residualScoresFactor, lOffset);
      printScoresBox(scan.directScores, scan.directScoresLhs,
                     scan.directScoresRhs, directScoresFactor, vOffset);
    }
  }
  if (delta)
    os << llvm::formatv(
        "  // T = (I + A)^-1 in the right operand's place, the gates' (read\n"
        "  // by now) the solve's partial products; into the chunk's record.\n"
        "  wg_unit_lower_inverse{1}(a, sm.right, sm.gates, [] {{});\n"
        "  wg_store_box(record + {0}, sm.right);\n",
        layout.offsets.lookup(scan.solve), aInQTile ? "<kWgHalvesLd>" : "");
  formedRight.clear(); // T took its place
  printKernelEnd(name);
  os << llvm::formatv("static_assert(sizeof(lina::{0}) == {1}, \"the "
                      "per-channel prepare kernel's shared memory\");\n",
                      lowRank
                          ? llvm::formatv("wg_channel_smem<{0}, 4>", K).str()
                          : llvm::formatv("wg_channel_smem<{0}>", K).str(),
                      channelSharedBytes(K, tiles));
  return sharedBytes;
}

int64_t Printer::printChannelScan(const std::string &name) {
  const int64_t HV = spec.valueHeads, K = spec.keyDim, V = spec.valueDim,
                VT = tileV, W = VT / 64;
  // The prepare kernel's second warpgroup leaves the scan at once; the
  // scan's warpgroups then meet at a barrier of their own.
  const bool idles = tileHasSecondWarpgroup(tileV, threads);
  const char *scanSync =
      idles ? "cta_sync_at<6, 128 * W>();" : "__syncthreads();";
  ChannelRecord layout = warpgroupChannelRecord(record, K);
  Operation *xOp = chainOp(scan.stateLhs), *kOp = chainOp(scan.updateLhs);
  os << llvm::formatv(
      "extern \"C\" __global__ void __launch_bounds__({0}, 1) {1}(lina::Params "
      "p, const __grid_constant__ lina::wg_maps maps) {{\n"
      "#if defined(__CUDA_ARCH_FEAT_SM90_ALL)\n"
      "  using namespace lina;\n"
      "  constexpr int K = {2}, V = {3}, VT = {4}, W = {5}, C = 64;\n"
      "  // A stage: v's tile and the chunk's record (the operands the\n"
      "  // prepare kernel stored); its bytes that land, and its stride.\n"
      "  constexpr int kValueTile = C * VT * 2, kRecordBytes = {6};\n"
      "  constexpr int kStageBytes = kValueTile + kRecordBytes;\n"
      "  constexpr int kStage = (kStageBytes + 1023) / 1024 * 1024;\n"
      "  LINA_DYNAMIC_SHARED_ALIGNED(unsigned char, wg_dynamic, 1024);\n"
      "  // Swizzled boxes start 1024-aligned (the host asks for 1024 bytes "
      "more).\n"
      "  unsigned char *wg_smem =\n"
      "      wg_dynamic + ((1024 - (shared_address(wg_dynamic) & 1023)) & "
      "1023);\n"
      "  // Two stages; the warpgroups' output staging; the stages' "
      "barriers.\n"
      "  unsigned char *stages = wg_smem;\n"
      "  mma_t *staging = (mma_t *)(wg_smem + 2 * kStage);\n"
      "  u64 *landed = (u64 *)(staging + W * C * 72);\n"
      "  // The CTA's value tile, value head and sequence; its\n"
      "  // warpgroups hold the head's value columns from v0.\n"
      "  const int vtile = blockIdx.x % (V / VT);\n"
      "  const int hv = blockIdx.x / (V / VT) % {7};\n"
      "  const i64 seq = blockIdx.x / (V / VT) / {7};\n"
      "  const int v0 = VT * vtile;\n"
      "  i64 begin, end;\n"
      "  sequence_bounds(p, seq, begin, end);\n"
      "  const int tid = threadIdx.x, wg = tid / 128;\n"
      "  mma_t *o = (mma_t *)p.o;\n"
      "  const bool out_words = aligned16(o);\n"
      "  wg_init_barriers(landed);\n"
      "{9}"
      "  auto fetch = [&](i64 t0, int stage) {{\n"
      "    unsigned char *at = stages + stage * kStage;\n"
      "    if (tid == 0) {{\n"
      "      // The stage's last readers passed the loop top's barrier; their\n"
      "      // generic writes go before the async proxy's.\n"
      "      async_proxy_fence();\n"
      "      mbar_expect_bytes(&landed[stage], kStageBytes);\n"
      "      for (int box = 0; box < VT / 64; ++box)\n"
      "        tma_box(at + box * 8192, &maps.v, v0 + 64 * box, hv, (int)t0, "
      "&landed[stage]);\n"
      "      bulk_copy(at + kValueTile, p.chunk_data + (chunk_slot(begin, "
      "seq, (t0 - begin) / C, C) * {7} + hv) * (i64)({8}), kRecordBytes, "
      "&landed[stage]);\n"
      "    }\n"
      "  };\n"
      "  // S^T as the update's m64nK accumulators "
      "(wg_each_state_element).\n"
      "  float s[K / 2];\n"
      "  wg_load_state<K, V>(s, p, seq, hv, {7}, W * vtile + wg);\n"
      "  if (begin < end)\n"
      "    fetch(begin, 0);\n"
      "  int stage = 0;\n"
      "  unsigned parity = 0; // of the stage's barrier: flips every "
      "second chunk\n"
      "  for (i64 t0 = begin; t0 < end; t0 += C, stage ^= 1, parity ^= "
      "stage ^ 1) {{\n"
      "    const int n = (int)min((i64)C, end - t0);\n"
      "    mbar_wait(&landed[stage], parity);\n"
      "    {10}\n"
      "    unsigned char *vt = stages + stage * kStage, *rec = vt + "
      "kValueTile;\n"
      "    float oacc[32];\n"
      "    unsigned a[K / 16][4];\n"
      "    wg_pack_state<K>(a, s);\n"
      "    wg_fence();\n",
      threads, name, K, V, VT, W, layout.bytes, HV, layout.bytes / 4,
      idles ? "  // The prepare kernel's second warpgroup: nothing to do "
              "here.\n"
              "  if (wg == W)\n"
              "    return;\n"
            : "",
      scanSync);
  // The state's products in their commit groups' order: X S and, for the
  // delta rule, Y S.
  std::vector<std::pair<int64_t, std::string>> top = {
      {groups.lookup(scan.stateProduct),
       llvm::formatv("    wg_issue_state_product<K>(oacc, a, rec + {0});\n",
                     layout.offsets.lookup(xOp))}};
  const bool delta = static_cast<bool>(scan.solve);
  if (delta) {
    os << "    float yacc[32];\n";
    top.push_back(
        {groups.lookup(scan.residualProduct),
         llvm::formatv("    wg_issue_state_product<K>(yacc, a, rec + {0});\n",
                       layout.offsets.lookup(chainOp(scan.residualKeys)))});
  }
  llvm::sort(top);
  for (auto &[group, issue] : top)
    os << issue;
  const int64_t topGroups = static_cast<int64_t>(top.size());
  os << "    // The next chunk's copies while they run.\n"
        "    if (t0 + C < end)\n"
        "      fetch(t0 + C, stage ^ 1);\n";
  if (scan.decay)
    os << llvm::formatv(
        "    // The state's decay a key channel; the products in flight read\n"
        "    // its packed copy.\n"
        "    wg_decay_key_columns<K>(s, (const float *)(rec + {0}));\n",
        layout.offsets.lookup(scan.decay));
  // The products of v's tile (the additive rule's, DPLR's) read its rows
  // past n as zero.
  if (!delta || scan.lowRank())
    os << "    // v's rows past n to zero (TMA reads on into the next "
          "sequence).\n"
          "    wg_zero_rows_past<VT"
       << (idles ? ", 128 * W" : "")
       << ">(vt, n);\n"
          "    async_proxy_fence();\n"
          "    "
       << scanSync << "\n";
  // The values U^T = R^T T^T from the residual's accumulators `residual`
  // with the chunk's prepared solve (then `waitForSolve`), and U's products
  // onto the output and the update.
  auto solveAndValues = [&](llvm::StringRef residual,
                            const std::string &waitForSolve) {
    os << llvm::formatv(
        "    unsigned rf[4][4];\n"
        "    wg_pack_columns(rf, {0}, [](int) {{ return 1.0f; });\n"
        "    wg_issue_solve(uacc, rf, rec + {1});\n"
        "{2}"
        "    // U^T for the output and the update.\n"
        "    unsigned uf[4][4];\n"
        "    wg_pack_columns(uf, uacc, [](int) {{ return 1.0f; });\n"
        "    wg_issue_values_intra(oacc, uf, rec + {3});\n"
        "    wg_issue_values_update<K>(s, uf, rec + {4});\n",
        residual, layout.offsets.lookup(scan.solve), waitForSolve,
        layout.offsets.lookup(scan.scores), layout.offsets.lookup(kOp));
  };
  if (scan.lowRank()) {
    os << llvm::formatv(
        "    // v's products: the residual's L V onto Y S, P V onto X S and\n"
        "    // K~^T V onto the decayed state.\n"
        "{0}"
        "    wg_issue_intra(yacc, vt, rec + {1}, wg);\n"
        "    wg_issue_intra(oacc, vt, rec + {2}, wg);\n"
        "    wg_issue_update<K>(s, vt, rec + {3}, wg);\n"
        "    // The values U^T = R^T T^T once the residual R^T = S^T Y^T +\n"
        "    // V^T L^T has landed.\n"
        "{4}"
        "    float uacc[32];\n",
        waitFor({scan.residualProduct, scan.stateProduct}, topGroups),
        layout.offsets.lookup(scan.residualScores),
        layout.offsets.lookup(scan.directScores),
        layout.offsets.lookup(chainOp(scan.directUpdateLhs)),
        waitFor({scan.residualIntra}, topGroups + 3));
    solveAndValues("yacc",
                   waitFor({scan.solve, scan.directIntra, scan.directUpdate},
                           topGroups + 4));
  } else if (!delta) {
    os << llvm::formatv("{0}"
                        "    wg_issue_intra(oacc, vt, rec + {1}, wg);\n"
                        "    wg_issue_update<K>(s, vt, rec + {2}, wg);\n",
                        waitFor({scan.stateProduct}, topGroups),
                        layout.offsets.lookup(scan.scores),
                        layout.offsets.lookup(kOp));
  } else {
    const std::string valuesFactor =
        scan.residualValues.factors.empty()
            ? "1.0f"
            : llvm::formatv(
                  "((const float *)(rec + {0}))[t]",
                  layout.offsets.lookup(scan.residualValues.factors.front()))
                  .str();
    os << llvm::formatv(
        "    // The residual R^T = V^T diag(x) - S^T Y^T once its product\n"
        "    // has landed (token columns past n zero), and the values U^T =\n"
        "    // R^T T^T with the chunk's prepared solve.\n"
        "{0}"
        "    float racc[32], uacc[32];\n"
        "    wg_residual(racc, yacc, vt, wg, n, [&](int t) {{ return {1}; }, "
        "[](int) {{ return 1.0f; });\n",
        waitFor({scan.residualProduct}, topGroups), valuesFactor);
    solveAndValues("racc",
                   waitFor({scan.solve, scan.stateProduct}, topGroups + 1));
  }
  // The intra-chunk product and the update, the chunk's last groups.
  const int64_t issued =
      topGroups + (delta ? 1 : 0) + (scan.lowRank() ? 3 : 0) + 2;
  os << llvm::formatv(
      "{1}"
      "    wg_store_output<{0}, V>(oacc, staging, o, t0, n, hv, W * vtile + "
      "wg, out_words);\n"
      "{2}"
      "  }\n"
      "  wg_store_state<K, V>(s, p, seq, hv, {0}, W * vtile + wg);\n",
      HV, waitFor({scan.intra}, issued), waitFor({scan.update}, issued));
  printKernelEnd(name);
  const int64_t stage = llvm::alignTo(kChunk * VT * 2 + layout.bytes, 1024);
  return 2 * stage + W * kChunk * 72 * 2 + 2 * 8 + 1024;
}

} // namespace

llvm::StringRef toString(WarpgroupRole role) {
  for (auto [r, name] : kRoleNames)
    if (r == role)
      return name;
  return "";
}

std::optional<WarpgroupRole> warpgroupRoleFrom(llvm::StringRef name) {
  for (auto [r, n] : kRoleNames)
    if (n == name)
      return r;
  return std::nullopt;
}

std::string planWarpgroupScan(ChunkedOp op, WarpgroupScan &scan) {
  scan = WarpgroupScan();
  return Planner(op, scan).plan();
}

std::string warpgroupScanRefusal(const Spec &spec, int64_t chunkSize,
                                 int64_t tileV, int64_t threads) {
  if (spec.dtype == DType::F32)
    return "mma warpgroup: the dtype must be bf16 or f16 (got f32: its "
           "products run on the fp32 units)";
  auto dim = [](int64_t d) { return d == 64 || d == 128; };
  if (!dim(spec.keyDim) || !dim(spec.valueDim))
    return llvm::formatv("mma warpgroup: key_dim and value_dim must be 64 or "
                         "128 (got {0} and {1})",
                         spec.keyDim, spec.valueDim)
        .str();
  // A warpgroup (four warps) for each 64 value columns of the CTA's: the
  // head's, or a 64-column tile of them (twice the CTAs on few heads). A
  // rule with a prepare kernel may give the tile a second warpgroup: the
  // delta rule's scores', or the prepare kernel's alone (a per-channel
  // decay, DPLR), whose chunks it then prepares on eight warps.
  const bool secondWarpgroup =
      wgmmaScanPreparesChunks(spec) && tileHasSecondWarpgroup(tileV, threads);
  if (chunkSize != kChunk || (tileV != spec.valueDim && tileV != 64) ||
      (threads != 2 * tileV && !secondWarpgroup))
    return llvm::formatv(
               "mma warpgroup: the schedule must be chunk size {0}, tile-v "
               "{1}, and 4 warps for each 64 columns of the tile (got {2}, "
               "{3} and {4} warps){5}",
               kChunk,
               spec.valueDim == 64 ? std::string("64")
                                   : std::to_string(spec.valueDim) + " or 64",
               chunkSize, tileV, threads / 32,
               tileHasSecondWarpgroup(tileV, threads)
                   ? "; 8 warps on a 64-column tile only for the rules with "
                     "a prepare kernel (the delta rule, DPLR, a per-channel "
                     "decay)"
                   : "")
        .str();
  // Two stages of the record (X, Y, K~, B~, P, L, T, the decay) and v's
  // tile fit in shared memory at key dim 128 for a 64-column tile only.
  if (wgmmaScanNeedsValueTiles(spec) && tileV != 64)
    return "mma warpgroup: a DPLR rule at key dim 128 runs tile-v 64 on 4 "
           "warps (two stages of its chunk record and a 128-column value "
           "tile exceed shared memory)";
  return "";
}

bool printsWarpgroupScan(ChunkedOp op) {
  std::optional<ScheduleAttr> schedule = op.getSchedule();
  if (!schedule || schedule->getMma() != ir::Mma::warpgroup)
    return false;
  return wgmmaScanCoversRule(toSpec(op.getSpec()));
}

LogicalResult recordOnPrintedScans(
    ModuleOp module, llvm::StringRef attr,
    llvm::function_ref<LogicalResult(ChunkedOp, WarpgroupScan &)> record) {
  bool failed = false;
  module.walk([&](ChunkedOp op) {
    op.getBody().walk(
        [&](Operation *inner) { inner->removeDiscardableAttr(attr); });
    if (!printsWarpgroupScan(op))
      return;
    WarpgroupScan scan;
    std::string refusal = planWarpgroupScan(op, scan);
    if (!refusal.empty()) {
      op.emitError(refusal);
      failed = true;
      return;
    }
    failed |= mlir::failed(record(op, scan));
  });
  return mlir::failure(failed);
}

LogicalResult
recordFromRoles(ModuleOp module, llvm::StringRef attr,
                llvm::function_ref<
                    llvm::DenseMap<Operation *, int64_t>(const WarpgroupScan &)>
                    plan) {
  return recordOnPrintedScans(
      module, attr, [&](ChunkedOp op, WarpgroupScan &scan) -> LogicalResult {
        bool roles = false;
        op.getBody().walk(
            [&](Operation *inner) { roles |= inner->hasAttr(kWarpgroupAttr); });
        if (!roles)
          return op.emitError("warpgroup scan: the chunk's ops carry no "
                              "'lina.warpgroup' parts (run "
                              "-lina-warpgroup-roles first)");
        Builder builder(op.getContext());
        for (auto [inner, value] : plan(scan))
          inner->setDiscardableAttr(attr, builder.getI64IntegerAttr(value));
        return success();
      });
}

namespace {
/// Whether `user` reads `producer`'s result through the chunk's ops.
bool readsThrough(Operation *user, Operation *producer) {
  llvm::SmallVector<Operation *, 16> work{user};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Operation *at = work.pop_back_val();
    for (Value operand : at->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (def == producer)
        return true;
      if (def && seen.insert(def).second)
        work.push_back(def);
    }
  }
  return false;
}
} // namespace

llvm::DenseMap<Operation *, int64_t>
orderWarpgroupGroups(const WarpgroupScan &scan) {
  // The products after the chunk's top, in the only order their operands
  // allow: the solve needs the residual, the intra-chunk product and the
  // update need the values.
  llvm::SmallVector<Operation *, 6> later;
  // DPLR: the residual's L V first (the solve waits on it), then v's
  // products, which need no values, while it lands.
  if (scan.lowRank()) {
    later.push_back(scan.residualIntra);
    later.push_back(scan.directIntra);
    later.push_back(scan.directUpdate);
  }
  if (scan.solve)
    later.push_back(scan.solve);
  later.push_back(scan.intra);
  later.push_back(scan.update);
  llvm::SmallVector<Operation *, 3> top;
  if (scan.residualProduct)
    top.push_back(scan.residualProduct);
  // A per-channel decay's scores come prepared; scores apart are issued
  // by their own warpgroup, in no group of the state's.
  if (!scan.perChannel() && !scan.scoresApart)
    top.push_back(scan.scores);
  top.push_back(scan.stateProduct);
  auto chain = [&](Operation *product) {
    return llvm::count_if(
        later, [&](Operation *l) { return readsThrough(l, product); });
  };
  llvm::stable_sort(
      top, [&](Operation *a, Operation *b) { return chain(a) > chain(b); });
  llvm::DenseMap<Operation *, int64_t> groups;
  for (Operation *product : llvm::concat<Operation *>(top, later))
    groups[product] = static_cast<int64_t>(groups.size());
  return groups;
}

ChannelRecord
warpgroupChannelRecord(const llvm::DenseMap<Operation *, int64_t> &slots,
                       int64_t keyDim) {
  llvm::SmallVector<std::pair<int64_t, Operation *>, 4> bySlot;
  for (auto [value, slot] : slots)
    bySlot.push_back({slot, value});
  llvm::sort(bySlot, llvm::less_first());
  ChannelRecord record;
  for (auto [slot, value] : bySlot) {
    record.offsets[value] = record.bytes;
    // A chain of v's rows is carried as its factor a row (64 floats).
    Operation *base = value;
    while (!isa<LoadOp>(base) && base->getNumOperands() > 0 &&
           base->getOperand(0).getDefiningOp())
      base = base->getOperand(0).getDefiningOp();
    const bool ofV =
        isa<LoadOp>(base) && cast<LoadOp>(base).getOperand() == ir::Operand::v;
    const int64_t bytes =
        isa<DecayProductOp, TriSolveOp>(value) ? kChunk * kChunk * 2
        : isa<DecayStateOp>(value) || ofV      ? 1024
                                               : kChunk * keyDim * 2;
    record.bytes += llvm::alignTo(bytes, 1024);
  }
  return record;
}

llvm::DenseMap<Operation *, int64_t>
planWarpgroupRecord(const WarpgroupScan &scan) {
  llvm::DenseMap<Operation *, int64_t> slots;
  if (scan.perChannel()) {
    // Every operand the scan reads but v, in program order.
    llvm::SmallPtrSet<Operation *, 8> carried = {
        chainOp(scan.stateLhs), chainOp(scan.updateLhs), scan.scores};
    // A DPLR chunk without a decay has none to carry.
    if (scan.decay)
      carried.insert(scan.decay);
    // The delta rule's: Y of Y S, T = (I + A)^-1 (on the solve) and the
    // residual's factor of v's rows, where it has one.
    if (scan.solve) {
      carried.insert(chainOp(scan.residualKeys));
      carried.insert(scan.solve);
      if (!scan.residualValues.factors.empty())
        carried.insert(scan.residualValues.factors.front());
    }
    // DPLR's v terms: L of L V, P of P V and K~ of K~^T V.
    if (scan.lowRank()) {
      carried.insert(scan.residualScores);
      carried.insert(scan.directScores);
      carried.insert(chainOp(scan.directUpdateLhs));
    }
    for (Operation &inner : *scan.scores->getBlock())
      if (carried.contains(&inner))
        slots[&inner] = static_cast<int64_t>(slots.size());
    return slots;
  }
  if (!scan.solve)
    return slots;
  // The row factors of k's rows that the scan's products read and that
  // cost more than a load a row (a product of factors, or a decay's
  // exponential): the outermost op of each, standing for its chain.
  llvm::SmallPtrSet<Operation *, 4> keyRows;
  for (const ScaledRows *rows : keyRowsOfProducts(scan))
    if (rows->load == scan.k && !rows->factors.empty() &&
        (rows->factors.size() > 1 || isa<DecayRowsOp>(rows->factors.front())))
      keyRows.insert(rows->factors.front());
  Block &body = *scan.solve->getBlock();
  for (Operation &inner : body) {
    WarpgroupRole role = scan.roles.lookup(&inner);
    bool carried = keyRows.contains(&inner);
    if (role == WarpgroupRole::Column)
      carried = llvm::any_of(inner.getUsers(), [&](Operation *user) {
        WarpgroupRole by = scan.roles.lookup(user);
        return by != WarpgroupRole::Column && by != WarpgroupRole::SolveMatrix;
      });
    else if (auto norm = dyn_cast<L2NormOp>(inner))
      carried = norm.getInput().getDefiningOp<LoadOp>() == scan.k;
    if (carried)
      slots[&inner] = static_cast<int64_t>(slots.size());
  }
  return slots;
}

namespace {
/// The value columns a CTA of `op`'s scan holds: its schedule's tile-v, or
/// the whole head without a schedule.
int64_t tileOf(ChunkedOp op, const Spec &spec) {
  std::optional<ScheduleAttr> schedule = op.getSchedule();
  return schedule ? schedule->getTileV() : spec.valueDim;
}

/// The threads of a CTA of `op`'s kernels: its schedule's warps, or a
/// warpgroup for each 64 value columns without a schedule.
int64_t threadsOf(ChunkedOp op, const Spec &spec) {
  std::optional<ScheduleAttr> schedule = op.getSchedule();
  return schedule ? 32 * schedule->getWarps() : 2 * tileOf(op, spec);
}

/// The prepared values' slots the kernels print: lina-warpgroup-record's
/// records, which must carry the values planWarpgroupRecord chooses, each
/// in a slot of its own below their count; or where records are not read,
/// the slots that pass chooses. Sets `error` on a bad record.
llvm::DenseMap<Operation *, int64_t> recordSlotsOf(const WarpgroupScan &scan,
                                                   bool checkRecords,
                                                   std::string &error) {
  llvm::DenseMap<Operation *, int64_t> planned = planWarpgroupRecord(scan);
  if (!checkRecords)
    return planned;
  llvm::DenseMap<Operation *, int64_t> recorded;
  llvm::SmallVector<bool, 4> taken(planned.size(), false);
  for (auto [inner, role] : scan.roles) {
    auto slot = inner->getAttrOfType<IntegerAttr>(kWarpgroupRecordAttr);
    const std::string name = "'" + inner->getName().getStringRef().str() + "'";
    if (!slot) {
      if (planned.count(inner))
        error = name + " carries no 'lina.wg_record' slot, but the scan reads "
                       "its value from the chunk's record (run "
                       "-lina-warpgroup-record first)";
      continue;
    }
    if (!planned.count(inner)) {
      error = name + " is recorded in the chunk's record, which carries only "
                     "the columns the scan reads, k's rows' norms and the "
                     "products of k's row factors (run "
                     "-lina-warpgroup-record)";
      continue;
    }
    const int64_t at = slot.getInt();
    if (at < 0 || at >= static_cast<int64_t>(planned.size()) || taken[at]) {
      error = llvm::formatv("{0} is recorded in slot {1} of the chunk's "
                            "record, which holds {2} values a slot each (run "
                            "-lina-warpgroup-record)",
                            name, at, planned.size());
      continue;
    }
    taken[at] = true;
    recorded[inner] = at;
  }
  return recorded;
}
} // namespace

int64_t printWarpgroupPrepare(llvm::raw_ostream &os, ChunkedOp op,
                              const Spec &spec, const std::string &name,
                              std::string &error, int64_t &recordFloats,
                              bool checkRecords) {
  WarpgroupScan scan;
  error = planWarpgroupScan(op, scan);
  if (!error.empty())
    return -1;
  if (!scan.solve && !scan.perChannel()) {
    error = "warpgroup scan: the chunk solves nothing to prepare";
    return -1;
  }
  llvm::DenseMap<Operation *, int64_t> record =
      recordSlotsOf(scan, checkRecords, error);
  if (!error.empty())
    return -1;
  if (scan.perChannel()) {
    recordFloats = warpgroupChannelRecord(record, spec.keyDim).bytes / 4;
    return Printer(os, scan, spec, error, tileOf(op, spec), threadsOf(op, spec),
                   llvm::DenseMap<Operation *, int64_t>(), std::move(record))
        .printChannelPrepare(name);
  }
  recordFloats =
      warpgroupSolveRecordFloats(static_cast<int64_t>(record.size()));
  // The prepare kernel issues one product: no groups to order.
  return Printer(os, scan, spec, error, tileOf(op, spec), threadsOf(op, spec),
                 llvm::DenseMap<Operation *, int64_t>(), std::move(record))
      .printPrepare(name);
}

int64_t printWarpgroupScan(llvm::raw_ostream &os, ChunkedOp op,
                           const Spec &spec, const std::string &name,
                           std::string &error, bool checkRecords,
                           bool segments) {
  WarpgroupScan scan;
  error = planWarpgroupScan(op, scan);
  if (!error.empty())
    return -1;
  // The printer prints what lina-warpgroup-roles recorded, and refuses a
  // record that is missing or disagrees with the chunk's ops.
  for (auto [inner, role] : scan.roles) {
    if (!checkRecords)
      break;
    auto recorded = inner->getAttrOfType<StringAttr>(kWarpgroupAttr);
    if (!recorded) {
      error = "'" + inner->getName().getStringRef().str() +
              "' carries no 'lina.warpgroup' part (run -lina-warpgroup-roles "
              "first)";
      return -1;
    }
    if (recorded.getValue() != toString(role)) {
      error = "'" + inner->getName().getStringRef().str() +
              "' is recorded as the warpgroup scan's '" +
              recorded.getValue().str() + "' but its operands make it its '" +
              toString(role).str() + "' (run -lina-warpgroup-roles)";
      return -1;
    }
  }
  // The products' commit groups: lina-warpgroup-groups' records, which
  // must give an order the kernel's structure allows (the products of the
  // landed tiles first, in any order, then the solve, the intra-chunk
  // product and the update), or where records are not read, the order
  // that pass chooses.
  llvm::DenseMap<Operation *, int64_t> groups = orderWarpgroupGroups(scan);
  if (checkRecords) {
    // The residual's product, the scores' (but a per-channel decay's,
    // prepared) and the state's.
    const int64_t top = (scan.solve ? 1 : 0) +
                        (scan.perChannel() || scan.scoresApart ? 0 : 1) + 1;
    llvm::DenseMap<Operation *, int64_t> recorded;
    llvm::SmallVector<int64_t, 6> seen;
    for (auto [product, planned] : groups) {
      auto group = product->getAttrOfType<IntegerAttr>(kWarpgroupGroupAttr);
      const std::string name = "'" + product->getName().getStringRef().str() +
                               "' (" +
                               toString(scan.roles.lookup(product)).str() + ")";
      if (!group) {
        error = name + " carries no 'lina.wg_group' commit group (run "
                       "-lina-warpgroup-groups first)";
        return -1;
      }
      const bool later = planned >= top;
      if (later ? group.getInt() != planned : group.getInt() >= top) {
        error = llvm::formatv(
            "{0} is recorded in commit group {1}, which the scan cannot issue "
            "it in: the chunk's first {2} groups are the products of its "
            "landed tiles, then {3}the intra-chunk product and the update "
            "(run -lina-warpgroup-groups)",
            name, group.getInt(), top, scan.solve ? "the solve, " : "");
        return -1;
      }
      recorded[product] = group.getInt();
      seen.push_back(group.getInt());
    }
    llvm::sort(seen);
    if (std::adjacent_find(seen.begin(), seen.end()) != seen.end()) {
      error = "two of the warpgroup scan's products are recorded in one "
              "commit group (run -lina-warpgroup-groups)";
      return -1;
    }
    groups = std::move(recorded);
  }
  llvm::DenseMap<Operation *, int64_t> record =
      recordSlotsOf(scan, checkRecords, error);
  if (!error.empty())
    return -1;
  Printer printer(os, scan, spec, error, tileOf(op, spec), threadsOf(op, spec),
                  std::move(groups), std::move(record));
  if (scan.perChannel()) {
    if (segments) {
      error = "segments: the warpgroup scan runs a per-channel decay's "
              "chunks whole sequences";
      return -1;
    }
    return printer.printChannelScan(name);
  }
  return printer.print(name, segments);
}

} // namespace lina::cuda
