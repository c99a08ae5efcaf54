//===- SpecJson.h - A spec as JSON for --json -------------------*- C++ -*-===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TOOLS_SPECJSON_H
#define LINA_TOOLS_SPECJSON_H

#include "lina/Spec/Spec.h"

#include "llvm/Support/JSON.h"

namespace lina::cli {

/// The spec's name and fields, under the names and spellings of its text
/// (`decay: "scalar"`, `key_dim: 128`, `dtype: "bf16"`); a default scale
/// and a gate_lower_bound that no lower_bound gate uses are null.
llvm::json::Object specToJson(const Spec &spec);

} // namespace lina::cli

#endif // LINA_TOOLS_SPECJSON_H
