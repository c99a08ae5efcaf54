//===- Executor.cpp - Run a chunked program in float64 -----------------===//
//
// Part of lina. For each sequence and value head the body of lina.chunked runs
// once per chunk, in order, with the state threaded through; values are
// float64 tiles. Rows of a chunk tile past the chunk's length are zero.
//
//===----------------------------------------------------------------------===//
#include "lina/Codegen/CpuExecutor.h"
#include "lina/Reference/Activations.h"
#include "lina/Dialect/Lina/IR/SpecConversion.h"

#include "ChunkInterpreter.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;

namespace lina {
namespace {

using cpu::ChunkInterpreter;
using cpu::ChunkPosition;
using cpu::Tile;

} // namespace

namespace cpu {

std::vector<ChunkPosition> headChunks(const reference::Problem &p,
                                      int64_t chunkSize, int64_t seq,
                                      int64_t hv) {
  const Spec &spec = p.spec;
  int64_t batch = spec.varlen ? 0 : seq;
  int64_t begin = spec.varlen ? p.cuSeqlens[seq] : 0;
  int64_t end = spec.varlen ? p.cuSeqlens[seq + 1] : p.seqLen;
  std::vector<ChunkPosition> chunks;
  for (int64_t t0 = begin; t0 < end; t0 += chunkSize)
    chunks.push_back({batch, t0, std::min(chunkSize, end - t0), hv,
                      hv / (spec.valueHeads / spec.heads)});
  return chunks;
}

Tile initialState(const reference::Problem &p, int64_t seq, int64_t hv) {
  const Spec &spec = p.spec;
  Tile state(spec.keyDim, spec.valueDim);
  if (spec.initialState)
    std::copy_n(p.initialState.begin() +
                    (seq * spec.valueHeads + hv) * state.data.size(),
                state.data.size(), state.data.begin());
  return state;
}

Tile ChunkInterpreter::load(ir::Operand operand, int64_t cols,
                            const ChunkPosition &pos) {
  Tile t(c, cols);
  int64_t H = spec.heads, HV = spec.valueHeads;
  if (operand == ir::Operand::g && spec.decay == DecayKind::FixedPerHead) {
    // One constant log gate per value head, in every valid row.
    for (int64_t r = 0; r < pos.rows; ++r)
      t.at(r, 0) = p.g[pos.valueHead];
    return t;
  }
  // Every per-token tensor is [B, T, heads, cols]: q and k have H heads and
  // are read at the value head's key head, the rest have HV.
  const std::vector<double> *buffer = nullptr;
  bool keyHeads = false;
  switch (operand) {
  case ir::Operand::q:
    buffer = &p.q, keyHeads = true;
    break;
  case ir::Operand::k:
    buffer = &p.k, keyHeads = true;
    break;
  case ir::Operand::v:
    buffer = &p.v;
    break;
  case ir::Operand::g:
    buffer = &p.g;
    break;
  case ir::Operand::beta:
    buffer = &p.beta;
    break;
  case ir::Operand::a:
    buffer = &p.a;
    break;
  case ir::Operand::b:
    buffer = &p.b;
    break;
  case ir::Operand::o:
    return t; // rejected by the verifier
  }
  int64_t heads = keyHeads ? H : HV;
  int64_t head = keyHeads ? pos.keyHead : pos.valueHead;
  for (int64_t r = 0; r < pos.rows; ++r) {
    int64_t token = pos.batch * p.seqLen + pos.firstToken + r;
    for (int64_t col = 0; col < cols; ++col)
      t.at(r, col) = (*buffer)[(token * heads + head) * cols + col];
  }
  return t;
}

void ChunkInterpreter::store(const Tile &o, const ChunkPosition &pos) {
  int64_t T = p.seqLen, HV = spec.valueHeads, V = spec.valueDim;
  for (int64_t r = 0; r < pos.rows; ++r) {
    int64_t token = pos.batch * T + pos.firstToken + r;
    for (int64_t col = 0; col < V; ++col)
      output->o[(token * HV + pos.valueHead) * V + col] = o.at(r, col);
  }
}

Tile ChunkInterpreter::gate(GateOp op, const Tile &x,
                            const ChunkPosition &pos) {
  return eachGateInput(
      op.getSource(), op.getLowerBound(), x, pos,
      [](GateSource source, double lowerBound, double aLog, double input,
         int64_t, int64_t) {
        return reference::computedLogGate(source, lowerBound, aLog, input);
      });
}

bool ChunkInterpreter::run(Block &body, llvm::ArrayRef<Tile> arguments,
                           const ChunkPosition &pos, Tile &yielded,
                           std::string &error) {
  Values values;
  for (auto [argument, tile] : llvm::zip(body.getArguments(), arguments))
    values[argument] = tile;
  for (Operation &op : body) {
    if (auto yield = dyn_cast<YieldOp>(op)) {
      yielded = values.find(yield.getState())->second;
      continue;
    }
    Tile out;
    if (!evaluateForward(op, values, pos, out) &&
        !evaluateBackward(op, values, pos, out)) {
      error = "the CPU executor does not implement '" +
              op.getName().getStringRef().str() + "'";
      return false;
    }
    if (op.getNumResults() == 1)
      values[op.getResult(0)] = std::move(out);
  }
  return true;
}

bool ChunkInterpreter::evaluateForward(Operation &op, const Values &values,
                                       const ChunkPosition &pos, Tile &out) {
  int64_t n = pos.rows;
  auto in = [&](Value v) -> const Tile & { return values.find(v)->second; };
  auto rowsOf = [&](Value v) { return cast<TileType>(v.getType()).getRows(); };
  auto colsOf = [&](Value v) { return cast<TileType>(v.getType()).getCols(); };
  bool known = true;
  TypeSwitch<Operation *>(&op)
      .Case([&](LoadOp o) {
        out = load(o.getOperand(), colsOf(o.getResult()), pos);
      })
      .Case([&](StoreOp o) { store(in(o.getValue()), pos); })
      .Case([&](ZerosOp o) {
        out = Tile(rowsOf(o.getResult()), colsOf(o.getResult()));
      })
      .Case([&](L2NormOp o) { out = cpu::l2norm(in(o.getInput())); })
      .Case([&](ScaleOp o) {
        out = cpu::scale(in(o.getInput()), o.getFactor().convertToDouble());
      })
      .Case([&](NegOp o) { out = cpu::neg(in(o.getInput())); })
      .Case([&](GateOp o) { out = gate(o, in(o.getInput()), pos); })
      .Case([&](BetaOp o) {
        const Tile &x = in(o.getInput());
        out = Tile(x.rows, x.cols);
        BetaSource source = o.getSource() == ir::BetaSource::two_sigmoid
                                ? BetaSource::TwoSigmoid
                                : BetaSource::Sigmoid;
        for (int64_t r = 0; r < n; ++r)
          out.at(r, 0) = reference::betaFromInput(source, x.at(r, 0));
      })
      .Case([&](CumsumOp o) {
        out = cpu::cumsum(in(o.getInput()), n, o.getExclusive());
      })
      .Case([&](AddOp o) { out = cpu::add(in(o.getLhs()), in(o.getRhs())); })
      .Case([&](SubOp o) { out = cpu::sub(in(o.getLhs()), in(o.getRhs())); })
      .Case([&](ScaleRowsOp o) {
        out = cpu::scaleRows(in(o.getInput()), in(o.getWeights()));
      })
      .Case([&](DecayRowsOp o) {
        out = cpu::decayRows(in(o.getInput()), in(o.getLogGates()), n,
                             o.getToEnd());
      })
      .Case([&](DecayStateOp o) {
        out = cpu::decayState(in(o.getState()), in(o.getLogGates()), n);
      })
      .Case([&](DecayProductOp o) {
        out = cpu::decayProduct(in(o.getLhs()), in(o.getRhs()),
                                in(o.getLhsGates()), in(o.getRhsGates()), n,
                                o.getMask() == ir::Mask::strict);
      })
      .Case([&](TriSolveOp o) {
        out = cpu::triSolve(in(o.getLower()), in(o.getRhs()));
      })
      .Case([&](MatmulOp o) {
        out = cpu::matmul(in(o.getLhs()), in(o.getRhs()), o.getTransposeLhs());
      })
      .Default([&](Operation *) { known = false; });
  return known;
}

} // namespace cpu


bool executeChunked(ChunkedOp program, const reference::Problem &problem,
                    reference::Result &result, std::string &error) {
  const Spec &spec = problem.spec;
  Spec programSpec = toSpec(program.getSpec());
  programSpec.name = spec.name;
  if (validate(spec).size() || programSpec.keyDim != spec.keyDim ||
      programSpec.valueDim != spec.valueDim || programSpec.heads != spec.heads ||
      programSpec.valueHeads != spec.valueHeads ||
      programSpec.varlen != spec.varlen) {
    error = "the problem's spec does not match the program's";
    return false;
  }
  error = reference::checkShapes(problem);
  if (!error.empty())
    return false;

  int64_t K = spec.keyDim, V = spec.valueDim, HV = spec.valueHeads;
  int64_t N = problem.numSequences();
  result.o.assign(problem.batch * problem.seqLen * HV * V, 0.0);
  result.finalState.assign(N * HV * K * V, 0.0);
  int64_t c = program.getChunkSize();
  ChunkInterpreter interp(problem, c);
  interp.output = &result;
  Block &body = program.getBody().front();
  for (int64_t seq = 0; seq < N; ++seq)
    for (int64_t hv = 0; hv < HV; ++hv) {
      Tile state = cpu::initialState(problem, seq, hv);
      for (const ChunkPosition &pos : cpu::headChunks(problem, c, seq, hv))
        if (!interp.run(body, {state}, pos, state, error))
          return false;
      std::copy(state.data.begin(), state.data.end(),
                result.finalState.begin() + (seq * HV + hv) * K * V);
    }
  return true;
}

} // namespace lina
