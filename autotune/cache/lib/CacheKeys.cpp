//===- CacheKeys.cpp - Cubin keys, tuning keys, shape buckets ----------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/CacheKeys.h"

#include "lina/Autotune/Sha256.h"

#include <cstdio>

#ifndef LINA_VERSION
#define LINA_VERSION "unknown"
#endif

namespace lina::cache {

namespace {

/// Adds "name=<length>:value\n": the length makes the encoding injective
/// whatever bytes the value holds.
void field(Sha256 &h, const char *name, const std::string &value) {
  std::string head =
      std::string(name) + "=" + std::to_string(value.size()) + ":";
  h.update(head);
  h.update(value);
  h.update("\n");
}

std::string number(double v) {
  // 17 significant digits print every double exactly, so two specs share a
  // text only when their values are bit-for-bit equal.
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

const char *boolean(bool b) { return b ? "true" : "false"; }

/// The smallest power of two >= v (v >= 1).
int64_t ceilPow2(int64_t v) {
  int64_t p = 1;
  while (p < v)
    p *= 2;
  return p;
}

} // namespace

const char *linaVersion() { return LINA_VERSION; }

std::string cubinKey(const CubinKeyParts &parts) {
  Sha256 h;
  // A domain tag keeps cubin and tuning keys apart in `lina cache show`.
  h.update("lina-cubin-key-v1\n");
  field(h, "source", parts.source);
  field(h, "options", std::to_string(parts.options.size()));
  for (const std::string &o : parts.options)
    field(h, "option", o);
  field(h, "arch", parts.arch);
  field(h, "nvrtc", parts.nvrtcVersion);
  field(h, "lina", parts.linaVersion);
  return toHex(h.finish());
}

std::string canonicalSpecText(const Spec &s) {
  std::string t;
  auto add = [&](const char *name, const std::string &value) {
    if (!t.empty())
      t += ' ';
    t += name;
    t += '=';
    t += value;
  };
  add("decay", toString(s.decay));
  add("update", toString(s.update));
  add("gate", toString(s.gate));
  if (s.gate == GateSource::LowerBound)
    add("gate_lower_bound", number(s.gateLowerBound));
  add("beta", toString(s.beta));
  add("low_rank_a", toString(s.lowRankA));
  add("low_rank_b", toString(s.lowRankB));
  add("write", toString(s.write));
  add("qk_l2norm", boolean(s.qkL2Norm));
  add("scale", number(s.effectiveScale()));
  add("key_dim", std::to_string(s.keyDim));
  add("value_dim", std::to_string(s.valueDim));
  add("heads", std::to_string(s.heads));
  add("value_heads", std::to_string(s.valueHeads));
  add("dtype", toString(s.dtype));
  add("initial_state", boolean(s.initialState));
  add("final_state", boolean(s.finalState));
  add("varlen", boolean(s.varlen));
  return t;
}

std::string ShapeBucket::str() const {
  auto range = [](int64_t lo, int64_t hi) {
    return std::to_string(lo) + ".." + (hi ? std::to_string(hi) : "");
  };
  return "bh=" + range(bhMin, bhMax) + ",t=" + range(tMin, tMax);
}

ShapeBucket shapeBucket(int64_t b, int64_t t, int64_t heads) {
  constexpr int64_t kMaxBh = 4096;
  constexpr int64_t kTLimits[] = {256, 1024, 4096, 16384};
  b = b < 1 ? 1 : b;
  t = t < 1 ? 1 : t;
  heads = heads < 1 ? 1 : heads;
  ShapeBucket bucket;
  // Saturate before multiplying: B and H are user input and B * H must not
  // overflow.
  int64_t bh = b > kMaxBh || heads > kMaxBh ? kMaxBh + 1 : b * heads;
  if (bh > kMaxBh) {
    bucket.bhMin = kMaxBh + 1;
    bucket.bhMax = 0;
  } else {
    bucket.bhMax = ceilPow2(bh);
    bucket.bhMin = bucket.bhMax == 1 ? 1 : bucket.bhMax / 2 + 1;
  }
  bucket.tMin = 1;
  bucket.tMax = 0;
  for (int64_t limit : kTLimits) {
    if (t <= limit) {
      bucket.tMax = limit;
      break;
    }
    bucket.tMin = limit + 1;
  }
  return bucket;
}

std::string TuningKey::digest() const {
  Sha256 h;
  h.update("lina-tuning-key-v1\n");
  field(h, "spec", spec);
  field(h, "gpu", gpuName);
  field(h, "arch", arch);
  field(h, "sm_count", std::to_string(smCount));
  field(h, "driver", driverVersion);
  field(h, "nvrtc", nvrtcVersion);
  field(h, "lina", linaVersion);
  field(h, "bucket", shapeBucket);
  return toHex(h.finish());
}

} // namespace lina::cache
