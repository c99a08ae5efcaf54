//===- SpecJson.cpp - A spec as JSON for --json ------------------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "SpecJson.h"

namespace lina::cli {

llvm::json::Object specToJson(const Spec &spec) {
  llvm::json::Value lowerBound = nullptr, scale = nullptr;
  if (spec.gate == GateSource::LowerBound)
    lowerBound = spec.gateLowerBound;
  if (spec.scale)
    scale = *spec.scale;
  return llvm::json::Object{
      {"name", spec.name},
      {"decay", toString(spec.decay)},
      {"update", toString(spec.update)},
      {"gate", toString(spec.gate)},
      {"gate_lower_bound", std::move(lowerBound)},
      {"beta", toString(spec.beta)},
      {"low_rank_a", toString(spec.lowRankA)},
      {"low_rank_b", toString(spec.lowRankB)},
      {"write", toString(spec.write)},
      {"qk_l2norm", spec.qkL2Norm},
      {"scale", std::move(scale)},
      {"key_dim", spec.keyDim},
      {"value_dim", spec.valueDim},
      {"heads", spec.heads},
      {"value_heads", spec.valueHeads},
      {"dtype", toString(spec.dtype)},
      {"initial_state", spec.initialState},
      {"final_state", spec.finalState},
      {"varlen", spec.varlen},
  };
}

} // namespace lina::cli
