//===- Chunk.cpp - A recurrence as its chunkwise algorithm -------------===//
//
// Part of lina. Replaces each lina.recurrence with a lina.chunked whose body
// computes one chunk of C tokens from the state S0 before it. With G the
// inclusive cumulative log gates of the chunk (Gx the exclusive ones):
//
//   additive  O  = (Q.e^G) S0 + P_qk V,     S' = e^{G_C} S0 + (K.e^{G_C-G})^T V
//   delta     A  = beta P_kk (strict),  W = (I+A)^-1 beta (K.e^G),
//             U  = (I+A)^-1 beta V,     N = U - W S0
//             O  = (Q.e^G) S0 + P_qk N, S' = e^{G_C} S0 + (K.e^{G_C-G})^T N
//   dplr      L  = P_ab(Gx, G) strict,  Wa = (I-L)^-1 (A.e^Gx),
//             Ua = Wa S0 + (I-L)^-1 P_ak(Gx, G) V
//             O  = (Q.e^G) S0 + P_qb Ua + P_qk V
//             S' = e^{G_C} S0 + (B.e^{G_C-G})^T Ua + (K.e^{G_C-G})^T V
//
// where P_xy[i,j] = sum_c x_ic y_jc exp(G_ic - G_jc), masked to j <= i unless
// marked strict (j < i). docs/algorithms.md derives each line. Every term
// that reads S0 uses the state *before* the chunk; the state update comes
// last.
//
//===----------------------------------------------------------------------===//
#include "lina/Dialect/Lina/IR/SpecConversion.h"
#include "lina/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "lina-chunk"

using namespace mlir;

namespace lina {
#define GEN_PASS_DEF_LINACHUNK
#include "lina/Transforms/Passes.h.inc"

namespace {

/// Builds the ops of one chunk body; names follow the header comment.
class ChunkBodyBuilder {
public:
  ChunkBodyBuilder(OpBuilder &b, Location loc, const Spec &spec, int64_t c)
      : b(b), loc(loc), spec(spec), c(c) {}

  /// Emits the body into the current insertion block, whose argument is S0,
  /// and returns the new state.
  Value build(Value s0, bool readUpdatedState);

private:
  TileType tile(int64_t rows, int64_t cols) {
    return TileType::get(b.getContext(), rows, cols);
  }
  TileType typeOf(Value v) { return cast<TileType>(v.getType()); }

  Value load(ir::Operand operand, int64_t cols) {
    return b.create<LoadOp>(loc, tile(c, cols), operand);
  }
  Value matmul(Value lhs, Value rhs, bool transposeLhs = false) {
    TileType l = typeOf(lhs);
    int64_t m = transposeLhs ? l.getCols() : l.getRows();
    return b.create<MatmulOp>(loc, tile(m, typeOf(rhs).getCols()), lhs, rhs,
                              transposeLhs);
  }
  Value add(Value x, Value y) { return b.create<AddOp>(loc, x, y); }
  Value sub(Value x, Value y) { return b.create<SubOp>(loc, x, y); }
  Value scaleRows(Value x, Value w) {
    return b.create<ScaleRowsOp>(loc, x.getType(), x, w);
  }
  /// x . e^G (or x . e^{G_C - G} with toEnd); identity without decay.
  Value decayRows(Value x, bool toEnd) {
    if (!G)
      return x;
    return b.create<DecayRowsOp>(loc, x.getType(), x, G, toEnd);
  }
  Value decayState(Value s) {
    if (!G)
      return s;
    return b.create<DecayStateOp>(loc, s.getType(), s, G);
  }
  /// P_xy with the decay ratios exp(Gl_i - Gr_j), masked.
  Value product(Value x, Value y, Value gl, Value gr, ir::Mask mask) {
    return b.create<DecayProductOp>(loc, tile(c, c), x, y, gl, gr, mask);
  }

  void loadGates();
  void loadBeta();
  Value lowRank(LowRankSource source, ir::Operand operand);

  OpBuilder &b;
  Location loc;
  const Spec &spec;
  int64_t c;
  Value q, k, v;
  Value g;     ///< per-step log gates (null without decay)
  Value G;     ///< inclusive cumulative log gates (null without decay)
  Value gZero; ///< zero gates for products when there is no decay
  Value beta;
};

void ChunkBodyBuilder::loadGates() {
  if (spec.decay == DecayKind::None) {
    gZero = b.create<ZerosOp>(loc, tile(c, 1));
    return;
  }
  g = load(ir::Operand::g, spec.decay == DecayKind::PerChannel ? spec.keyDim
                                                               : 1);
  if (spec.gate != GateSource::Given) {
    auto source = spec.gate == GateSource::Softplus
                      ? ir::GateSource::softplus
                      : ir::GateSource::lower_bound;
    FloatAttr bound = spec.gate == GateSource::LowerBound
                          ? b.getF64FloatAttr(spec.gateLowerBound)
                          : FloatAttr();
    g = b.create<GateOp>(loc, g.getType(), source, g, bound);
  }
  G = b.create<CumsumOp>(loc, g.getType(), g, /*exclusive=*/false);
}

void ChunkBodyBuilder::loadBeta() {
  bool needsBeta = spec.beta != BetaSource::None;
  if (!needsBeta)
    return;
  beta = load(ir::Operand::beta, 1);
  if (spec.beta == BetaSource::Sigmoid)
    beta = b.create<BetaOp>(loc, beta.getType(), ir::BetaSource::sigmoid, beta);
  else if (spec.beta == BetaSource::TwoSigmoid)
    beta = b.create<BetaOp>(loc, beta.getType(), ir::BetaSource::two_sigmoid,
                            beta);
}

/// A dplr vector: an input, or tied to k (the forms lina-specialize removes).
Value ChunkBodyBuilder::lowRank(LowRankSource source, ir::Operand operand) {
  switch (source) {
  case LowRankSource::Input:
    return load(operand, spec.keyDim);
  case LowRankSource::Zero:
    return b.create<ZerosOp>(loc, tile(c, spec.keyDim));
  case LowRankSource::BetaKey:
    return scaleRows(k, beta);
  case LowRankSource::NegDecayedKey: {
    // -(exp(g_t) . k_t): the per-step gate, not the cumulative one.
    Value dk = g ? b.create<DecayRowsOp>(loc, k.getType(), k, g, false)
                 : k;
    return b.create<NegOp>(loc, k.getType(), dk);
  }
  }
  llvm_unreachable("unknown low-rank source");
}

Value ChunkBodyBuilder::build(Value s0, bool readUpdatedState) {
  q = load(ir::Operand::q, spec.keyDim);
  k = load(ir::Operand::k, spec.keyDim);
  v = load(ir::Operand::v, spec.valueDim);
  if (spec.qkL2Norm) {
    q = b.create<L2NormOp>(loc, q);
    k = b.create<L2NormOp>(loc, k);
  }
  q = b.create<ScaleOp>(loc, q, b.getF64FloatAttr(spec.effectiveScale()));
  loadGates();
  loadBeta();
  Value gates = G ? G : gZero;

  // Every form ends the same way: the write term carries `written` (V, or N
  // for the delta rule) through the keys `writeKeys`; dplr adds its low-rank
  // term, B^T U into the state and P_qb U into the output.
  Value writeKeys = k, written = v, lowRankKeys, lowRankRead, pqb;
  // The write term w_t k_t v_t^T of the additive and dplr rules: fold w into
  // k where it is beta. (The delta rule's beta enters through its solves.)
  if (spec.update != UpdateRule::Delta && spec.write == WriteWeight::Beta)
    writeKeys = scaleRows(k, beta);
  switch (spec.update) {
  case UpdateRule::Additive:
    break;
  case UpdateRule::Delta: {
    Value a = scaleRows(product(k, k, gates, gates, ir::Mask::strict), beta);
    Value w = b.create<TriSolveOp>(loc, k.getType(), a,
                                   scaleRows(decayRows(k, false), beta));
    Value u = b.create<TriSolveOp>(loc, v.getType(), a, scaleRows(v, beta));
    written = sub(u, matmul(w, s0));
    break;
  }
  case UpdateRule::DPLR: {
    // a_i reads S_{i-1}: its decay runs to the token before, the exclusive
    // sum. a = -(exp(g_i) k_i) carries the token's own gate, so it decays
    // as -k_i to the token itself, the inclusive sum: the same values with
    // no per-step factor and no second sum.
    const bool aToRow = spec.lowRankA == LowRankSource::NegDecayedKey && G;
    Value av = aToRow ? Value(b.create<NegOp>(loc, k.getType(), k))
                      : lowRank(spec.lowRankA, ir::Operand::a);
    lowRankKeys = lowRank(spec.lowRankB, ir::Operand::b);
    Value gx = aToRow ? G
               : G    ? Value(b.create<CumsumOp>(loc, g.getType(), g,
                                              /*exclusive=*/true))
                      : gZero;
    Value lower = b.create<NegOp>(
        loc, tile(c, c), product(av, lowRankKeys, gx, gates, ir::Mask::strict));
    Value aDecayed =
        G ? Value(b.create<DecayRowsOp>(loc, av.getType(), av, gx, false))
          : av;
    Value wa = b.create<TriSolveOp>(loc, av.getType(), lower, aDecayed);
    Value pak = product(av, writeKeys, gx, gates, ir::Mask::strict);
    Value waS0 = matmul(wa, s0);
    lowRankRead = add(waS0, b.create<TriSolveOp>(loc, v.getType(), lower,
                                                 matmul(pak, v)));
    pqb = product(q, lowRankKeys, gates, gates, ir::Mask::inclusive);
    break;
  }
  }

  Value pqk = product(q, writeKeys, gates, gates, ir::Mask::inclusive);
  Value newState = decayState(s0);
  if (lowRankRead)
    newState = add(newState, matmul(decayRows(lowRankKeys, /*toEnd=*/true),
                                    lowRankRead, /*transposeLhs=*/true));
  newState = add(newState, matmul(decayRows(writeKeys, /*toEnd=*/true),
                                  written, /*transposeLhs=*/true));

  // The output reads the state before the chunk. `stateForOutput` exists only
  // so that a test can prove the numerical suite notices the wrong order.
  Value stateForOutput = readUpdatedState ? newState : s0;
  Value output = matmul(decayRows(q, /*toEnd=*/false), stateForOutput);
  if (lowRankRead)
    output = add(output, matmul(pqb, lowRankRead));
  output = add(output, matmul(pqk, written));
  b.create<StoreOp>(loc, ir::Operand::o, output);
  return newState;
}

struct LinaChunkPass : public impl::LinaChunkBase<LinaChunkPass> {
  using LinaChunkBase::LinaChunkBase;

  void runOnOperation() override {
    if (chunkSize != 16 && chunkSize != 32 && chunkSize != 64 &&
        chunkSize != 128) {
      getOperation().emitError()
          << "lina-chunk: chunk-size must be 16, 32, 64 or 128, got "
          << static_cast<int64_t>(chunkSize);
      return signalPassFailure();
    }
    SmallVector<RecurrenceOp> recurrences;
    getOperation().walk([&](RecurrenceOp op) { recurrences.push_back(op); });
    for (RecurrenceOp op : recurrences)
      rewrite(op);
  }

  void rewrite(RecurrenceOp op) {
    OpBuilder b(op);
    Spec spec = toSpec(op.getSpec());
    // The chunk size lina-choose-schedule recorded, unless this pass was
    // given one; its schedule goes along where the chunk size is its own.
    int64_t c = chunkSize;
    ScheduleAttr schedule;
    if (std::optional<uint64_t> chosen = op.getChunkSize()) {
      if (!chunkSize.hasValue())
        c = static_cast<int64_t>(*chosen);
      if (c == static_cast<int64_t>(*chosen))
        schedule = op.getScheduleAttr();
    }
    auto chunked = b.create<ChunkedOp>(
        op.getLoc(), b.getStringAttr(op.getSymName()), op.getSpec(),
        b.getI64IntegerAttr(c), schedule, PlacementAttr());
    Block *body = b.createBlock(&chunked.getBody());
    Value s0 = body->addArgument(
        TileType::get(b.getContext(), spec.keyDim, spec.valueDim), op.getLoc());
    ChunkBodyBuilder builder(b, op.getLoc(), spec, c);
    Value newState = builder.build(s0, testReadUpdatedState);
    b.create<YieldOp>(op.getLoc(), newState);
    LLVM_DEBUG(llvm::dbgs() << "chunked @" << op.getSymName() << " with C = "
                            << c << "\n");
    op.erase();
  }
};

} // namespace
} // namespace lina
