//===- LinaEnums.td - Enumerations of the lina dialect -----*- tablegen -*-===//
//
// Part of lina. The spellings match lina::toString in
// runtime/spec/lib/Spec.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_ENUMS_TD
#define LINA_ENUMS_TD

include "mlir/IR/EnumAttr.td"

def Lina_DecayKind : I32EnumAttr<"DecayKind", "the decay D_t", [
    I32EnumAttrCase<"none", 0>,
    I32EnumAttrCase<"fixed", 1>,
    I32EnumAttrCase<"scalar", 2>,
    I32EnumAttrCase<"per_channel", 3>]> {
  let cppNamespace = "::lina::ir";
  let genSpecializedAttr = 0;
}

def Lina_UpdateRule : I32EnumAttr<"UpdateRule", "the update rule", [
    I32EnumAttrCase<"additive", 0>,
    I32EnumAttrCase<"delta", 1>,
    I32EnumAttrCase<"dplr", 2>]> {
  let cppNamespace = "::lina::ir";
  let genSpecializedAttr = 0;
}

def Lina_GateSource : I32EnumAttr<"GateSource", "how the log gate is obtained", [
    I32EnumAttrCase<"given", 0>,
    I32EnumAttrCase<"softplus", 1>,
    I32EnumAttrCase<"lower_bound", 2>]> {
  let cppNamespace = "::lina::ir";
  // Op arguments use the specialized (integer) attribute.
}

def Lina_BetaSource : I32EnumAttr<"BetaSource", "how beta is obtained", [
    I32EnumAttrCase<"none", 0>,
    I32EnumAttrCase<"given", 1>,
    I32EnumAttrCase<"sigmoid", 2>,
    I32EnumAttrCase<"two_sigmoid", 3>]> {
  let cppNamespace = "::lina::ir";
  // Op arguments use the specialized (integer) attribute.
}

def Lina_LowRankSource : I32EnumAttr<"LowRankSource",
    "where a DPLR low-rank vector comes from", [
    I32EnumAttrCase<"input", 0>,
    I32EnumAttrCase<"zero", 1>,
    I32EnumAttrCase<"beta_key", 2>,
    I32EnumAttrCase<"neg_decayed_key", 3>]> {
  let cppNamespace = "::lina::ir";
  let genSpecializedAttr = 0;
}

def Lina_WriteWeight : I32EnumAttr<"WriteWeight", "the dplr write weight", [
    I32EnumAttrCase<"one", 0>,
    I32EnumAttrCase<"beta", 1>]> {
  let cppNamespace = "::lina::ir";
  let genSpecializedAttr = 0;
}

def Lina_Operand : I32EnumAttr<"Operand", "a per-token input or output tensor", [
    I32EnumAttrCase<"q", 0>,
    I32EnumAttrCase<"k", 1>,
    I32EnumAttrCase<"v", 2>,
    I32EnumAttrCase<"g", 3>,
    I32EnumAttrCase<"beta", 4>,
    I32EnumAttrCase<"a", 5>,
    I32EnumAttrCase<"b", 6>,
    I32EnumAttrCase<"o", 7>]> {
  let cppNamespace = "::lina::ir";
  // Op arguments use the specialized (integer) attribute.
}

def Lina_Mask : I32EnumAttr<"Mask", "which part of a chunk x chunk product is kept", [
    I32EnumAttrCase<"inclusive", 0>,
    I32EnumAttrCase<"strict", 1>]> {
  let cppNamespace = "::lina::ir";
  // Op arguments use the specialized (integer) attribute.
}

def Lina_Gradient : I32EnumAttr<"Gradient",
    "an input whose gradient the backward accumulates", [
    I32EnumAttrCase<"q", 0>,
    I32EnumAttrCase<"k", 1>,
    I32EnumAttrCase<"v", 2>,
    I32EnumAttrCase<"g", 3>,
    I32EnumAttrCase<"beta", 4>,
    I32EnumAttrCase<"a", 5>,
    I32EnumAttrCase<"b", 6>,
    I32EnumAttrCase<"gate_a_log", 7>,
    I32EnumAttrCase<"gate_dt_bias", 8>]> {
  let cppNamespace = "::lina::ir";
  // Op arguments use the specialized (integer) attribute.
}

def Lina_GateGradWrt : I32EnumAttr<"GateGradWrt",
    "what a computed gate's gradient is taken with respect to", [
    I32EnumAttrCase<"input", 0>,
    I32EnumAttrCase<"a_log", 1>,
    I32EnumAttrCase<"dt_bias", 2>]> {
  let cppNamespace = "::lina::ir";
}

def Lina_ProductSide : I32EnumAttr<"ProductSide",
    "which factor of a decay product a gradient is for", [
    I32EnumAttrCase<"lhs", 0>,
    I32EnumAttrCase<"rhs", 1>]> {
  let cppNamespace = "::lina::ir";
}

// How a chunked program's kernels walk the chunks. (The summary words the
// parser's complaint: "invalid strategy (...) specification: eager".)
def Lina_Strategy : I32EnumAttr<"Strategy",
    "strategy (fused, materialize or split)", [
    I32EnumAttrCase<"fused", 0>,
    I32EnumAttrCase<"materialize", 1>,
    I32EnumAttrCase<"split", 2>]> {
  let cppNamespace = "::lina::ir";
  let genSpecializedAttr = 0;
}

// Which matrix products a chunked program's scan runs on: warp-level
// mma.sync, or Hopper's warpgroup products (a #lina.schedule field).
def Lina_Mma : I32EnumAttr<"Mma",
    "mma (warp or warpgroup)", [
    I32EnumAttrCase<"warp", 0>,
    I32EnumAttrCase<"warpgroup", 1>]> {
  let cppNamespace = "::lina::ir";
  let genSpecializedAttr = 0;
}

// Where the kernel that walks a chunked program's chunks keeps the state
// (lina-place-state's decision, a #lina.placement field).
def Lina_StateHome : I32EnumAttr<"StateHome",
    "state home (shared or registers)", [
    I32EnumAttrCase<"shared", 0>,
    I32EnumAttrCase<"registers", 1>]> {
  let cppNamespace = "::lina::ir";
  let genSpecializedAttr = 0;
}

#endif // LINA_ENUMS_TD
