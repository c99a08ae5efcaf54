//===- CacheKeys.h - What a cached entry is for -----------------*- C++ -*-===//
//
// Part of lina. A cache entry may only be reused when everything that could
// change it is equal, so each key names all of it: a cubin depends on its
// source, NVRTC options, arch, NVRTC version and lina version; a tuning result
// on the spec, the GPU (name, arch, SM count), the driver and NVRTC versions,
// the lina version and the shape bucket.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_CACHEKEYS_H
#define LINA_AUTOTUNE_CACHEKEYS_H

#include "lina/Spec/Spec.h"

#include <cstdint>
#include <string>
#include <vector>

namespace lina::cache {

/// This build's version, for the keys: a cubin or a tuning result from
/// another lina version may come from different code and is not reused.
const char *linaVersion();

/// Everything that determines the bytes NVRTC produces.
struct CubinKeyParts {
  std::string source;
  std::vector<std::string> options;
  std::string arch;         ///< e.g. "sm_90a"
  std::string nvrtcVersion; ///< e.g. "12.4"
  std::string linaVersion = cache::linaVersion();
};

/// Hex SHA-256 of \p parts. Each field is length-prefixed, so no two
/// different inputs serialise alike (e.g. options {"-a", "b"} vs {"-a b"}).
std::string cubinKey(const CubinKeyParts &parts);

/// The spec as one line with every field explicit, in a fixed order, in the
/// names of docs/spec.md. The name is left out (renaming a spec does not
/// change its kernel), the scale is the effective one (an unset scale and an
/// explicit key_dim^-1/2 are the same kernel), and gate_lower_bound appears
/// only when gate = lower_bound, the only case that reads it.
std::string canonicalSpecText(const Spec &spec);

/// A range of problem shapes that share one tuning result.
///
/// Two axes decide which schedule wins. B * HV is the number of independent
/// (sequence, value head) scans, i.e. how many CTAs there are to fill the
/// GPU's SMs: it is bucketed by powers of two, (2^(k-1), 2^k], since the
/// occupancy regime changes with factors of two around the SM count; above
/// 4096 every schedule fills the GPU many times over and one bucket suffices.
/// T decides the number of chunks per sequence, which is what makes the
/// chunk-parallel materialize strategy pay or not: the ranges are <= 256,
/// <= 1024, <= 4096, <= 16384 and more, a factor of four apart so that a
/// bucket's shapes differ in chunk count by at most 4x.
struct ShapeBucket {
  int64_t bhMin = 1, bhMax = 1; ///< bhMax 0: no upper bound
  int64_t tMin = 1, tMax = 256; ///< tMax 0: no upper bound

  /// e.g. "bh=9..16,t=257..1024", "bh=4097..,t=16385.."; the form stored in
  /// the tuning key.
  std::string str() const;
  bool operator==(const ShapeBucket &o) const {
    return bhMin == o.bhMin && bhMax == o.bhMax && tMin == o.tMin &&
           tMax == o.tMax;
  }
};

/// The bucket of batch \p b, sequence length \p t and \p heads heads. Pass
/// the value heads (HV): CTAs are per value head. For varlen batches pass the
/// number of sequences and the longest one. Values below 1 count as 1.
ShapeBucket shapeBucket(int64_t b, int64_t t, int64_t heads);

/// The identity of one tuning problem; all its candidates share it.
struct TuningKey {
  std::string spec;    ///< canonicalSpecText()
  std::string gpuName; ///< e.g. "NVIDIA H200"
  std::string arch;    ///< e.g. "sm_90"
  int64_t smCount = 0;
  std::string driverVersion;
  std::string nvrtcVersion;
  std::string linaVersion = cache::linaVersion();
  std::string shapeBucket; ///< ShapeBucket::str()
  /// The spec's name, stored beside the key for `lina cache list`; not part
  /// of the key (nor of digest()): a renamed spec is the same problem.
  std::string specName;

  /// Hex SHA-256 of the fields above specName (length-prefixed): the key
  /// that `lina cache list/show` print.
  std::string digest() const;
};

} // namespace lina::cache

#endif // LINA_AUTOTUNE_CACHEKEYS_H
