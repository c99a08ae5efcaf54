//===- Problem.cpp - Shape checks and error measure -----------------------===//
//
// Part of lina. checkShapes is the one place that knows every tensor's shape;
// its messages are what a user sees when a buffer is the wrong size, so each
// names the tensor, the expected shape in symbols and in numbers, and what it
// got.
//
//===----------------------------------------------------------------------===//
#include "lina/Reference/Problem.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace lina::reference {

int64_t Problem::numSequences() const {
  if (!spec.varlen)
    return batch;
  // An empty cuSeqlens is an error checkShapes reports; say 0, not -1.
  return cuSeqlens.empty() ? 0 : static_cast<int64_t>(cuSeqlens.size()) - 1;
}

/// "[1, 3, 2, 8]".
static std::string formatDims(const std::vector<int64_t> &dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + "]";
}

/// The number of elements of a tensor of shape `dims`, or -1 when that does
/// not fit in int64_t (a huge batch or seqLen must not wrap around and match a
/// small buffer by accident).
static int64_t elementCount(const std::vector<int64_t> &dims) {
  int64_t count = 1;
  for (int64_t d : dims) {
    if (d < 0 || (d != 0 && count > std::numeric_limits<int64_t>::max() / d))
      return -1;
    count *= d;
  }
  return count;
}

/// "" when `tensor` holds exactly the elements of shape `dims` (named
/// `dimNames`, e.g. "[B, T, H, K]"), else a message naming the tensor.
static std::string checkSize(const std::string &tensor, size_t actual,
                             const std::string &dimNames,
                             const std::vector<int64_t> &dims) {
  int64_t expected = elementCount(dims);
  if (expected >= 0 && actual == static_cast<uint64_t>(expected))
    return "";
  std::string expectedCount = expected < 0
                                  ? "more values than int64_t can count"
                                  : std::to_string(expected) + " values";
  return "'" + tensor + "' has " + std::to_string(actual) +
         " values, expected shape " + dimNames + " = " + formatDims(dims) +
         " (" + expectedCount + ")";
}

/// "" when `tensor` is empty, else a message saying why it must be.
static std::string checkEmpty(const std::string &tensor, size_t actual,
                              const std::string &why) {
  if (actual == 0)
    return "";
  return "'" + tensor + "' must be empty " + why + ", got " +
         std::to_string(actual) + " values";
}

/// A tensor the spec either uses (then it must have shape `dims`) or does not
/// (then it must be empty, for the reason `whyEmpty`).
static std::string checkIfUsed(const std::string &tensor, size_t actual,
                               bool used, const std::string &dimNames,
                               const std::vector<int64_t> &dims,
                               const std::string &whyEmpty) {
  return used ? checkSize(tensor, actual, dimNames, dims)
              : checkEmpty(tensor, actual, whyEmpty);
}

/// The varlen description: cuSeqlens must cut [0, T) of the single batch row
/// into consecutive sequences.
static std::string checkCuSeqlens(const Problem &p) {
  const std::vector<int64_t> &cu = p.cuSeqlens;
  if (!p.spec.varlen)
    return checkEmpty("cuSeqlens", cu.size(),
                      "when varlen is off (each batch row is one sequence)");
  if (p.batch != 1)
    return "'batch' must be 1 when varlen is on (sequences are packed along "
           "T and 'cuSeqlens' gives their boundaries), got " +
           std::to_string(p.batch);
  if (cu.size() < 2)
    return "'cuSeqlens' must have N + 1 >= 2 entries (N sequences) when "
           "varlen is on, got " +
           std::to_string(cu.size());
  if (cu.front() != 0)
    return "'cuSeqlens' must start at 0, got cuSeqlens[0] = " +
           std::to_string(cu.front());
  for (size_t i = 0; i + 1 < cu.size(); ++i)
    if (cu[i + 1] < cu[i])
      return "'cuSeqlens' must be non-decreasing, but cuSeqlens[" +
             std::to_string(i) + "] = " + std::to_string(cu[i]) +
             " > cuSeqlens[" + std::to_string(i + 1) +
             "] = " + std::to_string(cu[i + 1]);
  if (cu.back() != p.seqLen)
    return "'cuSeqlens' must end at seqLen T = " + std::to_string(p.seqLen) +
           ", got cuSeqlens[" + std::to_string(cu.size() - 1) +
           "] = " + std::to_string(cu.back());
  return "";
}

/// g, A_log and dt_bias: which exist depends on the decay and gate source.
static std::string checkGate(const Problem &p) {
  const Spec &s = p.spec;
  const int64_t B = p.batch, T = p.seqLen, HV = s.valueHeads, K = s.keyDim;
  std::string error;
  switch (s.decay) {
  case DecayKind::None:
    error = checkEmpty("g", p.g.size(), "when decay = none");
    break;
  case DecayKind::FixedPerHead:
    error =
        checkSize("g", p.g.size(),
                  "[HV] (decay = fixed: one log gamma per value head)", {HV});
    break;
  case DecayKind::Scalar:
    error =
        checkSize("g", p.g.size(), "[B, T, HV] (decay = scalar)", {B, T, HV});
    break;
  case DecayKind::PerChannel:
    error = checkSize("g", p.g.size(), "[B, T, HV, K] (decay = per_channel)",
                      {B, T, HV, K});
    break;
  }
  if (!error.empty())
    return error;

  if (s.gate == GateSource::Given) {
    if (std::string e = checkEmpty("gateALog", p.gateALog.size(),
                                   "when gate = given (A_log is only used by "
                                   "computed gates)");
        !e.empty())
      return e;
    return checkEmpty("gateDtBias", p.gateDtBias.size(),
                      "when gate = given (dt_bias is only used by computed "
                      "gates)");
  }
  std::string gateName = toString(s.gate);
  if (p.gateALog.empty())
    return "'gateALog' (A_log) is missing: gate = " + gateName +
           " computes the log gate from A_log, shape [HV] = " +
           formatDims({HV});
  if (std::string e =
          checkSize("gateALog", p.gateALog.size(), "[HV] (A_log)", {HV});
      !e.empty())
    return e;
  // dt_bias is optional: empty means zero bias.
  if (p.gateDtBias.empty())
    return "";
  if (s.decay == DecayKind::Scalar)
    return checkSize("gateDtBias", p.gateDtBias.size(),
                     "[HV] (dt_bias of a scalar gate; or empty for 0)", {HV});
  return checkSize("gateDtBias", p.gateDtBias.size(),
                   "[HV, K] (dt_bias of a per-channel gate; or empty for 0)",
                   {HV, K});
}

std::string checkShapes(const Problem &p) {
  const Spec &s = p.spec;
  // The sizes below are only meaningful for a consistent spec.
  std::vector<std::string> specErrors = validate(s);
  if (!specErrors.empty())
    return "spec: " + specErrors.front();
  if (p.batch < 0)
    return "'batch' must not be negative, got " + std::to_string(p.batch);
  if (p.seqLen < 0)
    return "'seqLen' must not be negative, got " + std::to_string(p.seqLen);

  const int64_t B = p.batch, T = p.seqLen, H = s.heads, HV = s.valueHeads,
                K = s.keyDim, V = s.valueDim;
  // cuSeqlens first: the initial state's leading dimension depends on it.
  if (std::string e = checkCuSeqlens(p); !e.empty())
    return e;
  if (std::string e = checkSize("q", p.q.size(), "[B, T, H, K]", {B, T, H, K});
      !e.empty())
    return e;
  if (std::string e = checkSize("k", p.k.size(), "[B, T, H, K]", {B, T, H, K});
      !e.empty())
    return e;
  if (std::string e =
          checkSize("v", p.v.size(), "[B, T, HV, V]", {B, T, HV, V});
      !e.empty())
    return e;
  if (std::string e = checkGate(p); !e.empty())
    return e;

  const bool dplr = s.update == UpdateRule::DPLR;
  // A dplr spec reads a and b only where they are free inputs.
  const bool aInput = dplr && s.lowRankA == LowRankSource::Input;
  const bool bInput = dplr && s.lowRankB == LowRankSource::Input;
  if (std::string e = checkIfUsed("beta", p.beta.size(),
                                  s.beta != BetaSource::None,
                                  "[B, T, HV] (the spec has beta)", {B, T, HV},
                                  "unless the spec has beta");
      !e.empty())
    return e;
  if (std::string e = checkIfUsed("a", p.a.size(), aInput,
                                  "[B, T, HV, K] (update = dplr, low_rank_a = "
                                  "input)",
                                  {B, T, HV, K}, "unless a is a dplr input");
      !e.empty())
    return e;
  if (std::string e = checkIfUsed("b", p.b.size(), bInput,
                                  "[B, T, HV, K] (update = dplr, low_rank_b = "
                                  "input)",
                                  {B, T, HV, K}, "unless b is a dplr input");
      !e.empty())
    return e;
  std::string stateDims = s.varlen ? "[N, HV, K, V] (N = cuSeqlens.size() - 1)"
                                   : "[N, HV, K, V] (N = batch)";
  return checkIfUsed("initialState", p.initialState.size(), s.initialState,
                     stateDims, {p.numSequences(), HV, K, V},
                     "when the spec has no initial state");
}

bool isFinite(const Result &r) {
  auto finite = [](double x) { return std::isfinite(x); };
  return std::all_of(r.o.begin(), r.o.end(), finite) &&
         std::all_of(r.finalState.begin(), r.finalState.end(), finite);
}

double relativeError(const std::vector<double> &x,
                     const std::vector<double> &y) {
  const double infinity = std::numeric_limits<double>::infinity();
  if (x.size() != y.size())
    return infinity;
  // A NaN would make every comparison below false and could let a broken
  // result pass a tolerance check; report it as infinitely wrong instead.
  double largest = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(y[i]))
      return infinity;
    largest = std::max({largest, std::abs(x[i]), std::abs(y[i])});
  }
  if (largest == 0)
    return 0; // both all zero (or empty): identical
  // Divide by the largest magnitude first so squaring cannot overflow.
  double diff2 = 0, ref2 = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    double xs = x[i] / largest, ys = y[i] / largest;
    diff2 += (xs - ys) * (xs - ys);
    ref2 += ys * ys;
  }
  if (diff2 == 0)
    return 0;
  return ref2 == 0 ? infinity : std::sqrt(diff2 / ref2);
}

} // namespace lina::reference
