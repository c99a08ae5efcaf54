//===- ChunkInterpreter.h - Run a chunked body on one chunk -----*- C++ -*-===//
//
// Part of lina. Private to the CPU backend. Interprets the tile ops of a
// lina.chunked or lina.chunked_backward body on one chunk of one (sequence,
// value head), in float64: the forward's ops (Executor.cpp) and the
// backward's (GradExecutor.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef LINA_CODEGEN_CPU_CHUNKINTERPRETER_H
#define LINA_CODEGEN_CPU_CHUNKINTERPRETER_H

#include "TileMath.h"

#include "lina/Dialect/Lina/IR/Lina.h"
#include "lina/Reference/Backward.h"
#include "lina/Reference/Problem.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/DenseMap.h"

#include <optional>
#include <vector>

#include <string>

namespace lina::cpu {

/// Where the current chunk lives in the problem's buffers.
struct ChunkPosition {
  int64_t batch;      ///< index into B
  int64_t firstToken; ///< index into T of the chunk's first row
  int64_t rows;       ///< valid rows (n <= C)
  int64_t valueHead;  ///< hv
  int64_t keyHead;    ///< hv / (HV / H)
};

/// The chunks of sequence `seq` read by value head `hv`, first to last (the
/// last one partial where the length is not a multiple of the chunk size).
std::vector<ChunkPosition> headChunks(const reference::Problem &p,
                                      int64_t chunkSize, int64_t seq,
                                      int64_t hv);

/// The initial state of (seq, hv), or zeros when the spec has none.
Tile initialState(const reference::Problem &p, int64_t seq, int64_t hv);

class ChunkInterpreter {
public:
  ChunkInterpreter(const reference::Problem &p, int64_t chunkSize)
      : p(p), spec(p.spec), c(chunkSize) {}

  /// Where lina.store writes the output (forward bodies).
  reference::Result *output = nullptr;
  /// dL/do in o's layout, read by lina.load_output_grad (backward bodies).
  const std::vector<double> *outputGrad = nullptr;
  /// Where lina.accumulate adds (backward bodies).
  reference::Gradients *gradients = nullptr;

  /// Runs `body` on one chunk with its block arguments bound to
  /// `arguments`; `yielded` receives what lina.yield gives. False with
  /// `error` for an op this interpreter does not know.
  bool run(mlir::Block &body, llvm::ArrayRef<Tile> arguments,
           const ChunkPosition &pos, Tile &yielded, std::string &error);

private:
  using Values = llvm::DenseMap<mlir::Value, Tile>;

  /// The forward's ops; false when `op` is none of them.
  bool evaluateForward(mlir::Operation &op, const Values &values,
                       const ChunkPosition &pos, Tile &out);
  /// The backward's ops; false when `op` is none of them.
  bool evaluateBackward(mlir::Operation &op, const Values &values,
                        const ChunkPosition &pos, Tile &out);

  Tile load(ir::Operand operand, int64_t cols, const ChunkPosition &pos);
  void store(const Tile &o, const ChunkPosition &pos);
  Tile gate(GateOp op, const Tile &x, const ChunkPosition &pos);
  Tile loadOutputGrad(const ChunkPosition &pos);
  void accumulate(ir::Gradient operand, const Tile &value,
                  const ChunkPosition &pos);
  Tile gateGrad(GateGradOp op, const Tile &x, const Tile &dg,
                const ChunkPosition &pos);
  /// f(source, lowerBound, A_log, x + dt_bias, row, column) for each valid
  /// element of a computed gate's pre-activation x, with the current value
  /// head's parameters: what lina.gate and lina.gate_grad both evaluate.
  template <typename F>
  Tile eachGateInput(ir::GateSource irSource,
                     std::optional<llvm::APFloat> bound, const Tile &x,
                     const ChunkPosition &pos, F f) const {
    Tile out(x.rows, x.cols);
    GateSource source = irSource == ir::GateSource::softplus
                            ? GateSource::Softplus
                            : GateSource::LowerBound;
    double lowerBound = bound ? bound->convertToDouble() : 0.0;
    double aLog = p.gateALog[pos.valueHead];
    for (int64_t r = 0; r < pos.rows; ++r)
      for (int64_t col = 0; col < x.cols; ++col) {
        double bias = p.gateDtBias.empty()
                          ? 0.0
                          : p.gateDtBias[pos.valueHead * x.cols + col];
        out.at(r, col) =
            f(source, lowerBound, aLog, x.at(r, col) + bias, r, col);
      }
    return out;
  }

  const reference::Problem &p;
  const Spec &spec;
  int64_t c;
};

} // namespace lina::cpu

#endif // LINA_CODEGEN_CPU_CHUNKINTERPRETER_H
