//===- GradExecutor.cpp - Run a chunked backward in float64 ------------===//
//
// Part of lina. The backward's tile ops for ChunkInterpreter, and
// executeChunkedBackward: for each (sequence, value head) the forward runs
// first to keep the state before every chunk, then the backward body runs
// from the last chunk to the first with the state's gradient threaded
// through.
//
//===----------------------------------------------------------------------===//
#include "lina/Codegen/CpuExecutor.h"
#include "lina/Dialect/Lina/IR/SpecConversion.h"
#include "lina/Reference/ActivationGradients.h"
#include "lina/Reference/Activations.h"

#include "ChunkInterpreter.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace lina {
namespace cpu {

Tile ChunkInterpreter::loadOutputGrad(const ChunkPosition &pos) {
  int64_t HV = spec.valueHeads, V = spec.valueDim;
  Tile t(c, V);
  for (int64_t r = 0; r < pos.rows; ++r) {
    int64_t token = pos.batch * p.seqLen + pos.firstToken + r;
    for (int64_t col = 0; col < V; ++col)
      t.at(r, col) = (*outputGrad)[(token * HV + pos.valueHead) * V + col];
  }
  return t;
}

void ChunkInterpreter::accumulate(ir::Gradient operand, const Tile &value,
                                  const ChunkPosition &pos) {
  reference::Gradients &d = *gradients;
  int64_t H = spec.heads, HV = spec.valueHeads;
  // A per-head parameter sums the chunk's valid rows into its head's slot.
  auto perHead = [&](std::vector<double> &buffer, bool overColumns) {
    if (buffer.empty())
      return; // an input the problem leaves out (dt_bias of zero)
    for (int64_t r = 0; r < pos.rows; ++r)
      for (int64_t col = 0; col < value.cols; ++col)
        buffer[overColumns ? pos.valueHead * value.cols + col
                           : pos.valueHead] += value.at(r, col);
  };
  std::vector<double> *buffer = nullptr;
  bool keyHeads = false;
  switch (operand) {
  case ir::Gradient::q:
    buffer = &d.dq, keyHeads = true;
    break;
  case ir::Gradient::k:
    buffer = &d.dk, keyHeads = true;
    break;
  case ir::Gradient::v:
    buffer = &d.dv;
    break;
  case ir::Gradient::g:
    if (spec.decay == DecayKind::FixedPerHead)
      return perHead(d.dg, /*overColumns=*/false);
    buffer = &d.dg;
    break;
  case ir::Gradient::beta:
    buffer = &d.dBeta;
    break;
  case ir::Gradient::a:
    buffer = &d.da;
    break;
  case ir::Gradient::b:
    buffer = &d.db;
    break;
  case ir::Gradient::gate_a_log:
    return perHead(d.dGateALog, /*overColumns=*/false);
  case ir::Gradient::gate_dt_bias:
    return perHead(d.dGateDtBias, /*overColumns=*/true);
  }
  // q and k add into the q/k head the value head reads: grouped heads sum.
  int64_t heads = keyHeads ? H : HV;
  int64_t head = keyHeads ? pos.keyHead : pos.valueHead;
  for (int64_t r = 0; r < pos.rows; ++r) {
    int64_t token = pos.batch * p.seqLen + pos.firstToken + r;
    for (int64_t col = 0; col < value.cols; ++col)
      (*buffer)[(token * heads + head) * value.cols + col] += value.at(r, col);
  }
}

Tile ChunkInterpreter::gateGrad(GateGradOp op, const Tile &x, const Tile &dg,
                                const ChunkPosition &pos) {
  bool wrtALog = op.getWrt() == ir::GateGradWrt::a_log;
  return eachGateInput(op.getSource(), op.getLowerBound(), x, pos,
                       [&](GateSource source, double lowerBound, double aLog,
                           double input, int64_t r, int64_t col) {
                         reference::LogGateDerivatives d =
                             reference::logGateDerivatives(source, lowerBound,
                                                           aLog, input);
                         // dt_bias enters the gate as x does.
                         return dg.at(r, col) * (wrtALog ? d.dALog : d.dx);
                       });
}

bool ChunkInterpreter::evaluateBackward(Operation &op, const Values &values,
                                        const ChunkPosition &pos, Tile &out) {
  int64_t n = pos.rows;
  auto in = [&](Value v) -> const Tile & { return values.find(v)->second; };
  bool known = true;
  TypeSwitch<Operation *>(&op)
      .Case([&](LoadOutputGradOp) { out = loadOutputGrad(pos); })
      .Case([&](AccumulateOp o) {
        accumulate(o.getOperand(), in(o.getValue()), pos);
      })
      .Case([&](MulOp o) { out = cpu::mul(in(o.getLhs()), in(o.getRhs())); })
      .Case([&](RowSumOp o) { out = cpu::rowSum(in(o.getInput())); })
      .Case([&](RowDotOp o) {
        out = cpu::rowSum(cpu::mul(in(o.getLhs()), in(o.getRhs())));
      })
      .Case([&](SumOp o) {
        bool first = true;
        for (const SumOp::Term &term : o.getTerms()) {
          Tile t =
              term.rhs ? cpu::mul(in(term.lhs), in(term.rhs)) : in(term.lhs);
          if (first)
            out = term.subtracted ? cpu::neg(t) : t; // every term subtracted
          else
            out = term.subtracted ? cpu::sub(out, t) : cpu::add(out, t);
          first = false;
        }
      })
      .Case([&](ColSumOp o) { out = cpu::colSum(in(o.getInput())); })
      .Case(
          [&](StraddleSumOp o) { out = cpu::straddleSum(in(o.getInput()), n); })
      .Case([&](TransposeOp o) { out = cpu::transpose(in(o.getInput())); })
      .Case([&](AddToLastRowOp o) {
        out = cpu::addToLastRow(in(o.getInput()), in(o.getRow()), n);
      })
      .Case([&](ReverseCumsumOp o) {
        out = cpu::cumsum(in(o.getInput()), n, o.getExclusive(),
                          /*reverse=*/true);
      })
      .Case([&](DecayProductGradOp o) {
        out = cpu::decayProductGrad(o.getSide() == ir::ProductSide::lhs,
                                    in(o.getGrad()), in(o.getOther()),
                                    in(o.getLhsGates()), in(o.getRhsGates()), n,
                                    o.getMask() == ir::Mask::strict);
      })
      .Case([&](TriSolveTransposedOp o) {
        out = cpu::triSolveTransposed(in(o.getLower()), in(o.getRhs()));
      })
      .Case([&](StrictLowerOp o) { out = cpu::strictLower(in(o.getInput())); })
      .Case([&](L2NormGradOp o) {
        out = cpu::l2normGrad(in(o.getInput()), in(o.getGrad()));
      })
      .Case([&](BetaGradOp o) {
        const Tile &x = in(o.getInput()), &dBeta = in(o.getGrad());
        out = Tile(x.rows, x.cols);
        BetaSource source = o.getSource() == ir::BetaSource::two_sigmoid
                                ? BetaSource::TwoSigmoid
                                : BetaSource::Sigmoid;
        for (int64_t r = 0; r < n; ++r)
          out.at(r, 0) =
              dBeta.at(r, 0) * reference::betaDerivative(source, x.at(r, 0));
      })
      .Case([&](GateGradOp o) {
        out = gateGrad(o, in(o.getInput()), in(o.getGrad()), pos);
      })
      .Default([&](Operation *) { known = false; });
  return known;
}

} // namespace cpu

namespace {
/// Zeros shaped like `input`, or empty where the problem has no such input.
std::vector<double> zerosLike(const std::vector<double> &input) {
  return std::vector<double>(input.size(), 0.0);
}
} // namespace

bool executeChunkedBackward(ChunkedOp forward, ChunkedBackwardOp backward,
                            const reference::Problem &problem,
                            const std::vector<double> &dO,
                            const std::vector<double> &dFinalState,
                            reference::Gradients &gradients,
                            std::string &error) {
  const Spec &spec = problem.spec;
  int64_t K = spec.keyDim, V = spec.valueDim, HV = spec.valueHeads;
  int64_t N = problem.numSequences();
  if (forward.getChunkSize() != backward.getChunkSize() ||
      forward.getSpec() != backward.getSpec()) {
    error = "the backward program is not the forward program's";
    return false;
  }
  // The forward's own checks (spec against the problem, shapes) come first.
  reference::Result scratch;
  if (!executeChunked(forward, problem, scratch, error))
    return false;
  if (dO.size() != scratch.o.size() ||
      (!dFinalState.empty() &&
       dFinalState.size() != scratch.finalState.size())) {
    error = "dO must have o's shape and dFinalState the final state's (or "
            "be empty)";
    return false;
  }
  reference::Gradients &d = gradients;
  d = {};
  d.dq = zerosLike(problem.q), d.dk = zerosLike(problem.k);
  d.dv = zerosLike(problem.v), d.dg = zerosLike(problem.g);
  d.dGateALog = zerosLike(problem.gateALog);
  d.dGateDtBias = zerosLike(problem.gateDtBias);
  d.dBeta = zerosLike(problem.beta), d.da = zerosLike(problem.a);
  d.db = zerosLike(problem.b);
  d.dInitialState = zerosLike(problem.initialState);

  int64_t c = forward.getChunkSize();
  cpu::ChunkInterpreter interp(problem, c);
  interp.output = &scratch;
  interp.outputGrad = &dO;
  interp.gradients = &gradients;
  Block &forwardBody = forward.getBody().front();
  Block &backwardBody = backward.getBody().front();
  for (int64_t seq = 0; seq < N; ++seq)
    for (int64_t hv = 0; hv < HV; ++hv) {
      const int64_t stateAt = (seq * HV + hv) * K * V;
      std::vector<cpu::ChunkPosition> chunks =
          cpu::headChunks(problem, c, seq, hv);
      // The state before each chunk, from the forward.
      std::vector<cpu::Tile> before;
      cpu::Tile state = cpu::initialState(problem, seq, hv);
      for (const cpu::ChunkPosition &pos : chunks) {
        before.push_back(state);
        if (!interp.run(forwardBody, {state}, pos, state, error))
          return false;
      }
      cpu::Tile stateGrad(K, V);
      if (!dFinalState.empty())
        std::copy_n(dFinalState.begin() + stateAt, K * V,
                    stateGrad.data.begin());
      for (size_t i = chunks.size(); i-- > 0;)
        if (!interp.run(backwardBody, {before[i], stateGrad}, chunks[i],
                        stateGrad, error))
          return false;
      if (spec.initialState)
        std::copy(stateGrad.data.begin(), stateGrad.data.end(),
                  d.dInitialState.begin() + stateAt);
    }
  return true;
}

} // namespace lina
