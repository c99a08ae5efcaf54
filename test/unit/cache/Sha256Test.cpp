//===- Sha256Test.cpp - SHA-256 against known vectors -------------------===//
//
// Part of lina. FIPS 180-4 examples, a 1 MB input, and every padding case
// around the 55/56 and 64-byte boundaries (digests from Python's hashlib).
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/Sha256.h"

#include <gtest/gtest.h>

using namespace lina::cache;

namespace {

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256Hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256Hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(
      sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, OneMillionAs) {
  EXPECT_EQ(sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/// Bytes (7 i + 3) mod 256, i = 0..n-1.
std::string pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i)
    s[i] = static_cast<char>((i * 7 + 3) % 256);
  return s;
}

TEST(Sha256, PaddingBoundaries) {
  // 55 bytes is the longest message whose length fits in its last block;
  // 56..63 need an extra block; 64, 119 and 120 straddle the next ones.
  const std::pair<size_t, const char *> cases[] = {
      {55, "e7313d333c272e639f790978283f9eb392e843d0f29b7016828bb1daa4aac70b"},
      {56, "4324d65f3c103567f5589c710bc08f8523f929a9272e3af36fc968e52abc6c27"},
      {63, "81c80242132f230c3bd41b3e63bbcff16107339549214a99614ff26664625055"},
      {64, "39e3d7b6b5d075d37d053ad89b24b41bef4f3c29760c84447cab3f3be1882241"},
      {65, "aacca6ff74fdbb296d165a45cecfa04e5127bc008770fbbdd48006f2d2fae95e"},
      {119, "9ce7368e4daf32341631b492e80359dc9f594b48453cd0dd5bf0b19279cc177e"},
      {120, "7836b787757e95e58b3ca5aec90b1b004e8deba1e50e9675af9cabf1a13a04b5"},
      {1000,
       "1e9bc38cbf860b9ec31918b065f9b52476c549a782e0e7990bed8ce3868d2371"},
  };
  for (auto [n, hex] : cases)
    EXPECT_EQ(sha256Hex(pattern(n)), hex) << n << " bytes";
}

TEST(Sha256, IncrementalEqualsOneShot) {
  std::string data = pattern(1000);
  std::string expected = sha256Hex(data);
  // Piece sizes that leave the buffer partly full, exactly full, and that
  // cross several blocks at once.
  for (size_t piece : {1u, 3u, 63u, 64u, 65u, 200u}) {
    Sha256 h;
    for (size_t at = 0; at < data.size(); at += piece)
      h.update(std::string_view(data).substr(at, piece));
    EXPECT_EQ(toHex(h.finish()), expected) << "pieces of " << piece;
  }
  Sha256 h;
  h.update("junk");
  h.reset();
  h.update(data);
  EXPECT_EQ(toHex(h.finish()), expected) << "after reset()";
}

} // namespace
