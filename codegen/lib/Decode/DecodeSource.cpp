//===- DecodeSource.cpp - The recurrent form as CUDA C++ ---------------===//
//
// Part of lina. The source is the decode device library (Decode.cuh) and,
// after it, the spec as a struct of constants and one extern "C" kernel per
// warp-column width. The constants select the branches of decode_warp at
// compile time, so each kernel holds only its spec's arithmetic.
//
//===----------------------------------------------------------------------===//
#include "lina/Codegen/DecodePlanner.h"

#include "DecodeLibrary.h"

#include "llvm/Support/FormatVariadic.h"

namespace lina {
namespace {

std::string floatLiteral(double v) { return llvm::formatv("{0:e9}f", v).str(); }

/// Decode.cuh's element types.
const char *elementType(DType d) {
  switch (d) {
  case DType::BF16:
    return "bf16";
  case DType::F16:
    return "f16";
  case DType::F32:
    return "float";
  }
  return "float";
}

int decayCode(DecayKind d) {
  switch (d) {
  case DecayKind::None:
    return 0;
  case DecayKind::FixedPerHead:
    return 1;
  case DecayKind::Scalar:
    return 2;
  case DecayKind::PerChannel:
    return 3;
  }
  return 0;
}

int updateCode(UpdateRule u) {
  return u == UpdateRule::Additive ? 0 : u == UpdateRule::Delta ? 1 : 2;
}

int gateCode(GateSource g) {
  return g == GateSource::Given ? 0 : g == GateSource::Softplus ? 1 : 2;
}

int betaCode(BetaSource b) {
  switch (b) {
  case BetaSource::None:
    return 0;
  case BetaSource::Given:
    return 1;
  case BetaSource::Sigmoid:
    return 2;
  case BetaSource::TwoSigmoid:
    return 3;
  }
  return 0;
}

int lowRankCode(LowRankSource s) {
  switch (s) {
  case LowRankSource::Input:
    return 0;
  case LowRankSource::Zero:
    return 1;
  case LowRankSource::BetaKey:
    return 2;
  case LowRankSource::NegDecayedKey:
    return 3;
  }
  return 0;
}

/// `__launch_bounds__` of the kernel for `width` columns per warp: at most
/// 256 threads, and for the 16-column kernels at least two such CTAs per SM,
/// which caps them at 128 registers. The step is bound by the state's
/// bandwidth, so warps in flight count: kda's 16-column kernel took 130
/// registers uncapped (ptxas, sm_90), three 4-warp CTAs per SM instead of
/// four, and reached 73% of the copy rate at batch 256 against gdn's 92%
/// at 128 registers. Capped it needs 128 and spills nothing; gdn, deltanet,
/// gla and retnet are at 127-128 either way. dplr is left uncapped: its a
/// and b rows take ~224 registers at 16 columns (212 bytes of spill at
/// 128), and its default never picks that width.
std::string launchBounds(const Spec &spec, int64_t width) {
  if (width == 16 && spec.update != UpdateRule::DPLR)
    return "256, 2";
  return "256";
}

} // namespace

std::string printDecodeSource(const Spec &spec,
                              const std::vector<int64_t> &warpColumns,
                              const std::vector<std::string> &kernelNames) {
  std::string out = cuda::decodeLibrarySource();
  out += "\nnamespace lina_decode {\n";
  out += "struct Config {\n";
  out += llvm::formatv("  typedef {0} T;\n", elementType(spec.dtype)).str();
  out += llvm::formatv("  static constexpr int K = {0}, V = {1}, H = {2}, "
                       "HV = {3};\n",
                       spec.keyDim, spec.valueDim, spec.heads, spec.valueHeads)
             .str();
  out += llvm::formatv("  static constexpr int DECAY = {0}, UPDATE = {1}, "
                       "GATE = {2}, BETA = {3};\n",
                       decayCode(spec.decay), updateCode(spec.update),
                       gateCode(spec.gate), betaCode(spec.beta))
             .str();
  out += llvm::formatv("  static constexpr int LOW_RANK_A = {0}, LOW_RANK_B "
                       "= {1}, WRITE = {2};\n",
                       lowRankCode(spec.lowRankA), lowRankCode(spec.lowRankB),
                       spec.write == WriteWeight::Beta ? 1 : 0)
             .str();
  out += llvm::formatv("  static constexpr bool QK_L2NORM = {0};\n",
                       spec.qkL2Norm ? "true" : "false")
             .str();
  out += "  static constexpr float SCALE = " +
         floatLiteral(spec.effectiveScale()) + ";\n";
  out += "  static constexpr float GATE_LOWER_BOUND = " +
         floatLiteral(spec.gate == GateSource::LowerBound ? spec.gateLowerBound
                                                          : 0.0) +
         ";\n";
  out += "};\n} // namespace lina_decode\n\n";
  // Every [K, V] kernel, then their [V, K] twins (kDecodeVFirstSuffix).
  for (bool vFirst : {false, true})
    for (size_t i = 0; i < warpColumns.size(); ++i)
      out +=
          llvm::formatv("extern \"C\" __global__ void __launch_bounds__({0})\n"
                        "{1}{3}(const lina_decode::DecodeParams p) {{\n"
                        "  lina_decode::decode_warp<lina_decode::Config, {2}, "
                        "{4}>(p);\n"
                        "}\n"
                        "LINA_KERNEL_ENTRY({1}{3})\n",
                        launchBounds(spec, warpColumns[i]), kernelNames[i],
                        warpColumns[i], vFirst ? kDecodeVFirstSuffix : "",
                        vFirst ? "true" : "false")
              .str();
  return out;
}

} // namespace lina
