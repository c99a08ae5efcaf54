//===- Sha256.h - SHA-256 for cache keys and checksums ----------*- C++ -*-===//
//
// Part of lina. FIPS 180-4 SHA-256, small and dependency-free: the cache keys
// compiled cubins by the digest of everything that went into them and stores
// the digest of each blob to catch a corrupted row. A collision-resistant hash
// is needed for the key (two different sources must never share a cubin), so
// a fast non-cryptographic hash such as FNV would not do.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_SHA256_H
#define LINA_AUTOTUNE_SHA256_H

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace lina::cache {

/// An incremental SHA-256: update() any number of times, then finish() once.
class Sha256 {
public:
  using Digest = std::array<uint8_t, 32>;

  Sha256();
  void update(const void *data, size_t size);
  void update(std::string_view data) { update(data.data(), data.size()); }
  /// Pads, returns the digest and leaves the object unusable until reset().
  Digest finish();
  void reset();

private:
  void compress(const uint8_t *block);

  std::array<uint32_t, 8> state;
  std::array<uint8_t, 64> buffer;
  size_t buffered = 0;
  uint64_t totalBytes = 0;
};

/// Lower-case hex of \p digest (64 characters).
std::string toHex(const Sha256::Digest &digest);

/// Lower-case hex SHA-256 of \p data.
std::string sha256Hex(std::string_view data);

} // namespace lina::cache

#endif // LINA_AUTOTUNE_SHA256_H
